package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// SummaryLine is the closing line: "Plan: 1 node to add, 2 nodes to
// change, 1 network to replace, 37 endpoints to reprogram." or "No
// changes. ...".
func (r *Result) SummaryLine() string {
	if !r.HasChanges() {
		return "No changes. The Windows nodes' HNS plans are the same."
	}
	s := r.Summarize()
	parts := []string{}
	add := func(n int, one, many, verb string) {
		if n > 0 {
			noun := one
			if n != 1 {
				noun = many
			}
			parts = append(parts, fmt.Sprintf("%d %s %s", n, noun, verb))
		}
	}
	add(s.NodesAdded, "node", "nodes", "to add")
	add(s.NodesChanged, "node", "nodes", "to change")
	add(s.NodesRemoved, "node", "nodes", "to remove")
	add(s.NetworksReplaced, "network", "networks", "to replace")
	if r.Inventory {
		parts = append(parts, fmt.Sprintf("%d endpoints to reprogram", s.EndpointsReprogrammed))
	}
	return "Plan: " + strings.Join(parts, ", ") + "."
}

// colours for text output (ANSI), by action.
var colours = map[Action]string{Create: "32", Update: "33", Delete: "31", Replace: "35"}

// WriteText writes the diff as Terraform writes a plan: a legend, then
// each node's changes with their symbols and reasons, then the summary.
func (r *Result) WriteText(w io.Writer, color bool) error {
	t := &textWriter{w: w, color: color}
	for _, n := range r.Notes {
		t.line("Note: %s", n)
	}
	if len(r.Notes) > 0 {
		t.line("")
	}
	if r.HasChanges() {
		t.line("hnsplan diff: actions are shown with these symbols:")
		t.line("  + create   ~ update in place   - destroy   -/+ destroy and recreate (drains the node)")
		t.line("")
	}
	node := ""
	for _, c := range r.Changes {
		if c.Node != node {
			if node != "" {
				t.line("")
			}
			node = c.Node
			t.line("# node %s", node)
		}
		t.change(c)
	}
	if r.HasChanges() {
		t.line("")
	}
	t.line("%s", r.SummaryLine())
	return t.err
}

type textWriter struct {
	w          io.Writer
	color      bool
	err        error
	maxDetails int // 0: all
}

// markdownDetails is how many detail lines a change shows in markdown.
const markdownDetails = 12

func (t *textWriter) line(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format+"\n", args...)
	}
}

func (t *textWriter) sym(a Action) string {
	s := fmt.Sprintf("%3s", a.Symbol())
	if t.color {
		return "\x1b[" + colours[a] + "m" + s + "\x1b[0m"
	}
	return s
}

func (t *textWriter) change(c Change) {
	what := map[string]string{"node": "node", "network": "network", "hostEndpoint": "host endpoint",
		"remoteSubnetRoutes": "remote subnet routes", "hostRoutes": "host routes", "podEndpoint": "pod endpoint", "policy": "policy"}[c.Kind]
	header := fmt.Sprintf("%s %s %q", t.sym(c.Action), what, c.Name)
	switch c.Kind {
	case "remoteSubnetRoutes", "hostRoutes", "policy":
		header = fmt.Sprintf("%s %s", t.sym(c.Action), c.Name)
		if c.Kind != "policy" {
			header = fmt.Sprintf("%s %s", t.sym(c.Action), what)
		}
	case "podEndpoint":
		header = fmt.Sprintf("%s pod endpoint template", t.sym(c.Action))
	}
	if c.Action == Replace {
		header += "  # forces replacement: " + strings.Join(c.Impact, "; ")
	} else if len(c.Impact) > 0 {
		header += "  # " + strings.Join(c.Impact, "; ")
	}
	t.line("%s", header)
	if len(c.Reasons) > 0 {
		t.line("      reasons: %s", strings.Join(c.Reasons, ", "))
	}
	for i, d := range c.Details {
		if t.maxDetails > 0 && i == t.maxDetails {
			t.line("      … %d more lines (hnsplan diff -o json has them)", len(c.Details)-i)
			break
		}
		force := ""
		if d.ForcesReplacement {
			force = "  # forces replacement"
		}
		list := d.Path == "Policies" || c.Kind == "remoteSubnetRoutes" || c.Kind == "hostRoutes" || c.Kind == "policy" && d.Path == "policy"
		switch {
		case list && d.Before == "":
			t.line("      + %s%s", d.After, force)
		case list && d.After == "":
			t.line("      - %s%s", d.Before, force)
		case list:
			t.line("      ~ %s", d.After)
		default:
			t.line("      ~ %s: %s -> %s%s", d.Path, orNone(d.Before), orNone(d.After), force)
		}
	}
	if n := len(c.Endpoints); n > 0 {
		t.line("      endpoints to reprogram (%d): %s", n, shorten(c.Endpoints, 10))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func shorten(s []string, max int) string {
	if len(s) <= max {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:max], ", ") + fmt.Sprintf(" and %d more", len(s)-max)
}

// MarkdownCap is the largest comment hnsplan writes: GitHub caps a
// comment at 65,535 characters.
const MarkdownCap = 65000

// Markdown renders the diff for a pull-request comment: the summary first,
// then one folded section per node, cut to MarkdownCap characters with a
// notice when it does not fit.
func (r *Result) Markdown() string {
	var b strings.Builder
	s := r.Summarize()
	b.WriteString("### hnsplan: Windows HNS plan diff\n\n")
	b.WriteString("**" + r.SummaryLine() + "**\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "> [!NOTE]\n> %s\n\n", n)
	}
	if s.NetworksReplaced > 0 {
		fmt.Fprintf(&b, "> [!WARNING]\n> %d network(s) will be replaced: each replace drains its node before recreating the HNS network.\n\n", s.NetworksReplaced)
	}
	if !r.HasChanges() {
		return b.String()
	}
	head := b.String()
	var sections []string
	for _, node := range r.nodes() {
		var body strings.Builder
		tw := &textWriter{w: &body, maxDetails: markdownDetails}
		var title []string
		for _, c := range r.Changes {
			if c.Node != node {
				continue
			}
			tw.change(c)
			title = append(title, fmt.Sprintf("%s %s", c.Action.Symbol(), c.Kind))
		}
		sections = append(sections, fmt.Sprintf("<details><summary><code>%s</code>: %s</summary>\n\n```diff\n%s```\n\n</details>\n",
			node, strings.Join(title, ", "), diffMarks(body.String())))
	}
	out := head
	for i, sec := range sections {
		notice := fmt.Sprintf("\n_… %d more nodes not shown: the comment would pass %d characters. Run `hnsplan diff` locally, or with `-o json`, for the whole diff._\n", len(sections)-i, MarkdownCap)
		if len(out)+len(sec)+len(notice) > MarkdownCap {
			return out + notice
		}
		out += sec
	}
	return out
}

// diffMarks moves each line's action mark to the first column, so that a
// ```diff block colours it.
func diffMarks(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case strings.HasPrefix(trimmed, "-/+"):
			b.WriteString("!" + trimmed[3:])
		case strings.HasPrefix(trimmed, "+"), strings.HasPrefix(trimmed, "-"):
			b.WriteString(trimmed[:1] + " " + l)
		case strings.HasPrefix(trimmed, "~"):
			b.WriteString("! " + l)
		default:
			b.WriteString("  " + l)
		}
	}
	return b.String()
}

func (r *Result) nodes() []string {
	var out []string
	for _, c := range r.Changes {
		if len(out) == 0 || out[len(out)-1] != c.Node {
			out = append(out, c.Node)
		}
	}
	return out
}

// jsonSummary is the summary in JSON output.
type jsonSummary struct {
	NodesAdded       int `json:"nodesAdded"`
	NodesChanged     int `json:"nodesChanged"`
	NodesRemoved     int `json:"nodesRemoved"`
	NetworksReplaced int `json:"networksReplaced"`
	// EndpointsReprogrammed is known only with an inventory.
	EndpointsReprogrammed *int   `json:"endpointsReprogrammed,omitempty"`
	Line                  string `json:"line"`
}

// WriteJSON writes {"changes":[...],"summary":{...}} (DESIGN §4.3).
func (r *Result) WriteJSON(w io.Writer) error {
	s := r.Summarize()
	sum := jsonSummary{NodesAdded: s.NodesAdded, NodesChanged: s.NodesChanged, NodesRemoved: s.NodesRemoved,
		NetworksReplaced: s.NetworksReplaced, Line: r.SummaryLine()}
	if r.Inventory {
		sum.EndpointsReprogrammed = &s.EndpointsReprogrammed
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		Changes []Change    `json:"changes"`
		Notes   []string    `json:"notes,omitempty"`
		Summary jsonSummary `json:"summary"`
	}{r.Changes, r.Notes, sum})
}
