package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/access"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// SummaryLine is the closing line: "Plan: 1 node to add, 2 nodes to
// change, 1 network to replace, 37 endpoints to reprogram." or "No
// changes. ...".
func (r *Result) SummaryLine() string {
	if !r.HasChanges() {
		return "No changes. The Windows nodes' HNS plans are the same."
	}
	if len(r.Changes) == 0 {
		return "Plan: no change to the Windows nodes' HNS plans. " + r.VXLAN.Summary() + "."
	}
	s := r.Summarize()
	parts := []string{}
	add := func(n int, one, many, verb string) {
		if n > 0 {
			noun := one
			if n != 1 {
				noun = many
			}
			parts = append(parts, fmt.Sprintf("%s %s %s", diag.Thousands(n), noun, verb))
		}
	}
	add(s.NodesAdded, "node", "nodes", "to add")
	add(s.NodesChanged, "node", "nodes", "to change")
	add(s.NodesRemoved, "node", "nodes", "to remove")
	add(s.NetworksReplaced, "network", "networks", "to replace")
	if r.Inventory {
		parts = append(parts, fmt.Sprintf("%s endpoints to reprogram", diag.Thousands(s.EndpointsReprogrammed)))
	}
	line := "Plan: " + strings.Join(parts, ", ") + "."
	if r.VXLAN != nil {
		line += " " + r.VXLAN.Summary() + "."
	}
	if r.Access != nil {
		denied, allowed := r.accessCounts()
		line += fmt.Sprintf(" Access: %s newly denied, %d newly allowed.", plural(denied, "connection"), allowed)
	}
	return line
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
	if r.VXLAN != nil {
		// First: it is what the node-by-node replaces below do not say.
		for _, l := range r.VXLAN.Lines() {
			t.line("%s", l)
		}
		t.line("")
	}
	for i, g := range r.Groups() {
		if i > 0 {
			t.line("")
		}
		t.line("# %s", groupTitle(g.Nodes))
		for _, c := range g.Changes {
			t.change(c)
		}
	}
	if len(r.Changes) > 0 {
		t.line("")
	}
	if r.Access != nil {
		for _, l := range r.accessLines(0) {
			t.line("%s", l)
		}
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
	case "node":
		if c.Name == "" {
			header = fmt.Sprintf("%s each node", t.sym(c.Action))
		}
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
	var lines []string
	for _, d := range c.Details {
		lines = append(lines, detailLine(c, d))
	}
	for _, p := range c.Policies {
		head := fmt.Sprintf("%s %s", strings.TrimSpace(p.Action.Symbol()), p.ID)
		if p.Source != "" {
			head += "  (" + p.Source + ")"
		}
		lines = append(lines, head)
		for _, f := range p.Fields {
			lines = append(lines, "    "+fieldLine(f))
		}
	}
	for i, l := range lines {
		if t.maxDetails > 0 && i == t.maxDetails {
			t.line("      … %d more lines (hnsplan diff -o json has them)", len(lines)-i)
			break
		}
		t.line("      %s", l)
	}
	if n := len(c.Endpoints); n > 0 {
		t.line("      endpoints to reprogram (%d): %s", n, shorten(c.Endpoints, 10))
	}
}

// detailLine is one attribute's difference, or one listed item added or
// removed.
func detailLine(c Change, d Detail) string {
	force := ""
	if d.ForcesReplacement {
		force = "  # forces replacement"
	}
	list := d.Path == "Policies" || c.Kind == "remoteSubnetRoutes" || c.Kind == "hostRoutes"
	switch {
	case c.Kind == "remoteSubnetRoutes" && d.Path == c.Kind+".IsolationId":
		return fmt.Sprintf("~ VSID %s -> %s on every route both route tables hold", d.Before, d.After)
	case list && d.Before == "":
		return "+ " + d.After + force
	case list && d.After == "":
		return "- " + d.Before + force
	case list:
		return "~ " + d.After
	}
	return fmt.Sprintf("~ %s: %s -> %s%s", d.Path, orNone(d.Before), orNone(d.After), force)
}

// fieldLine is one field of a policy: changed, or a rule added or removed.
func fieldLine(d Detail) string {
	switch {
	case d.Before == "" && d.After != "" && isRule(d.Path):
		return fmt.Sprintf("+ %s: %s", d.Path, d.After)
	case d.After == "" && d.Before != "" && isRule(d.Path):
		return fmt.Sprintf("- %s: %s", d.Path, d.Before)
	}
	return fmt.Sprintf("~ %s: %s -> %s", d.Path, orNone(d.Before), orNone(d.After))
}

// isRule reports whether a field path names a whole rule ("ingress[0]").
func isRule(path string) bool {
	return (strings.HasPrefix(path, "ingress[") || strings.HasPrefix(path, "egress[")) && !strings.Contains(path, ".")
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
		fmt.Fprintf(&b, "> [!WARNING]\n> %s network(s) will be replaced: each replace drains its node before recreating the HNS network.\n\n", diag.Thousands(s.NetworksReplaced))
	}
	if v := r.VXLAN; v != nil {
		fmt.Fprintf(&b, "> [!CAUTION]\n> The VXLAN %s changes for every node, Linux and Windows: until all have switched, pods on nodes on different values cannot reach each other across nodes. Change the Linux side too, and mind the window:\n\n<details open><summary>VXLAN: the Linux side and the window</summary>\n\n```text\n%s\n```\n\n</details>\n\n",
			v.Values(), strings.Join(v.Lines(), "\n"))
	}
	if !r.HasChanges() {
		return b.String()
	}
	if r.Access != nil {
		b.WriteString(r.accessMarkdown())
	}
	out := b.String()
	groups := r.Groups()
	rest := 0 // the nodes of the groups not yet written
	for _, g := range groups {
		rest += len(g.Nodes)
	}
	// Sections are rendered one at a time, up to the cap: a diff of
	// thousands of differing nodes renders only what is shown.
	for _, g := range groups {
		var body strings.Builder
		tw := &textWriter{w: &body, maxDetails: markdownDetails}
		var title []string
		for _, c := range g.Changes {
			tw.change(c)
			title = append(title, fmt.Sprintf("%s %s", c.Action.Symbol(), c.Kind))
		}
		sec := fmt.Sprintf("<details><summary>%s: %s</summary>\n\n```diff\n%s```\n\n</details>\n",
			markdownNodes(g.Nodes), strings.Join(title, ", "), diffMarks(body.String()))
		notice := fmt.Sprintf("\n_… %s more nodes not shown: the comment would pass %d characters. Run `hnsplan diff` locally, or with `-o json`, for the whole diff._\n", diag.Thousands(rest), MarkdownCap)
		if len(out)+len(sec)+len(notice) > MarkdownCap {
			return out + notice
		}
		out += sec
		rest -= len(g.Nodes)
	}
	return out
}

// markdownNodes names a group's nodes in a summary line.
func markdownNodes(nodes []string) string {
	switch n := len(nodes); {
	case n == 1:
		return "<code>" + nodes[0] + "</code>"
	case n <= 10:
		return fmt.Sprintf("the same change on %d nodes: <code>%s</code>", n, strings.Join(nodes, "</code>, <code>"))
	default:
		return fmt.Sprintf("the same change on %s nodes: <code>%s</code> … <code>%s</code>", diag.Thousands(n), nodes[0], nodes[n-1])
	}
}

// diffMarks moves each line's action mark to the first column, so that a
// ```diff block colours it.
func diffMarks(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
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

// FormatVersion is the version of the JSON form: it changes when a field
// changes meaning or goes away, never when one is added.
const FormatVersion = 1

// jsonSummary is the summary in JSON output.
type jsonSummary struct {
	NodesAdded       int `json:"nodesAdded"`
	NodesChanged     int `json:"nodesChanged"`
	NodesRemoved     int `json:"nodesRemoved"`
	NetworksReplaced int `json:"networksReplaced"`
	// EndpointsReprogrammed is known only with an inventory.
	EndpointsReprogrammed *int `json:"endpointsReprogrammed,omitempty"`
	// The access delta's counts, when it was computed.
	NewlyDenied  *int   `json:"newlyDenied,omitempty"`
	NewlyAllowed *int   `json:"newlyAllowed,omitempty"`
	Line         string `json:"line"`
}

// WriteJSON writes {"formatVersion":1,"changes":[...],"vxlanChange":{...},
// "access":[...],"summary":{...}} (DESIGN §4.3); vxlanChange only when the
// VNI or port changes, access only when it was computed.
func (r *Result) WriteJSON(w io.Writer) error {
	s := r.Summarize()
	sum := jsonSummary{NodesAdded: s.NodesAdded, NodesChanged: s.NodesChanged, NodesRemoved: s.NodesRemoved,
		NetworksReplaced: s.NetworksReplaced, Line: r.SummaryLine()}
	if r.Inventory {
		sum.EndpointsReprogrammed = &s.EndpointsReprogrammed
	}
	var acc *[]access.Change
	var accessInfo *jsonAccess
	if r.Access != nil {
		denied, allowed := r.accessCounts()
		sum.NewlyDenied, sum.NewlyAllowed = &denied, &allowed
		acc = &r.Access.Changes
		accessInfo = &jsonAccess{EndpointsEvaluated: r.Access.Endpoints, Pods: r.Access.Pods, Ports: r.Access.Ports}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		FormatVersion int              `json:"formatVersion"`
		Changes       []Change         `json:"changes"`
		VXLAN         *vxlan.Change    `json:"vxlanChange,omitempty"`
		Access        *[]access.Change `json:"access,omitempty"`
		AccessInfo    *jsonAccess      `json:"accessProbed,omitempty"`
		Notes         []string         `json:"notes,omitempty"`
		Summary       jsonSummary      `json:"summary"`
	}{FormatVersion, r.Changes, r.VXLAN, acc, accessInfo, r.Notes, sum})
}

// jsonAccess says what the access delta evaluated.
type jsonAccess struct {
	EndpointsEvaluated int    `json:"endpointsEvaluated"`
	Pods               int    `json:"pods"`
	Ports              string `json:"ports"`
}
