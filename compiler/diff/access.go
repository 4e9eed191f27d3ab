package diff

import (
	"fmt"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/access"
)

// MarkdownAccess is how many access changes a comment lists; -o json has
// them all.
const MarkdownAccess = 40

// accessCounts counts the connections newly denied and newly allowed.
func (r *Result) accessCounts() (denied, allowed int) {
	for _, c := range r.Access.Changes {
		if c.After == access.Denied {
			denied++
		} else {
			allowed++
		}
	}
	return denied, allowed
}

func (r *Result) accessHeading() string {
	denied, allowed := r.accessCounts()
	if denied+allowed == 0 {
		return fmt.Sprintf("Access changes (0): no connection between the inventory's pods changes (%s evaluated against %s)",
			plural(r.Access.Endpoints, "changed endpoint"), plural(r.Access.Pods, "pod"))
	}
	return fmt.Sprintf("Access changes (%d): %d newly denied, %d newly allowed", denied+allowed, denied, allowed)
}

// accessLines lists the access changes, at most max of them (0: all), each
// with the deciding ACL or rule before and after.
func (r *Result) accessLines(max int) []string {
	out := []string{r.accessHeading()}
	if len(r.Access.Changes) > 0 {
		out = append(out, "  ports probed: "+r.Access.Ports)
	}
	// A pair whose ports change alike, for the same reasons, is one line.
	type line struct {
		c     access.Change
		ports []string
	}
	var lines []*line
	for _, c := range r.Access.Changes {
		port := fmt.Sprintf("%s/%d", c.Protocol, c.Port)
		if n := len(lines); n > 0 {
			l := lines[n-1]
			if l.c.From == c.From && l.c.To == c.To && l.c.After == c.After &&
				deciderText(l.c, l.c.DecidedBy.Before) == deciderText(c, c.DecidedBy.Before) &&
				deciderText(l.c, l.c.DecidedBy.After) == deciderText(c, c.DecidedBy.After) {
				l.ports = append(l.ports, port)
				continue
			}
		}
		lines = append(lines, &line{c: c, ports: []string{port}})
	}
	for i, l := range lines {
		if max > 0 && i == max {
			rest := 0
			for _, m := range lines[i:] {
				rest += len(m.ports)
			}
			out = append(out, fmt.Sprintf("  … and %d more (hnsplan diff -o json lists them all)", rest))
			break
		}
		c := l.c
		mark := "+"
		if c.After == access.Denied {
			mark = "-"
		}
		out = append(out, fmt.Sprintf("%s %s -> %s  %s: %s -> %s", mark, c.From, c.To, strings.Join(l.ports, ", "), c.Before, c.After),
			"    before: "+deciderText(c, c.DecidedBy.Before),
			"    after:  "+deciderText(c, c.DecidedBy.After))
	}
	return out
}

// deciderText says which end decided and by what: "ingress of web/iis-1
// (win-1, windows): ACL x, rule ... file:line".
func deciderText(c access.Change, d access.Decider) string {
	pod := c.To
	if d.Direction == "egress" {
		pod = c.From
	}
	verdict := "allows"
	if !d.Allowed {
		verdict = "denies"
	}
	by := "Calico on Linux"
	if d.ACL != "" {
		by = "ACL " + d.ACL
	} else if d.OS == "windows" {
		by = "HNS"
	}
	return fmt.Sprintf("%s of %s (%s, %s) %s: %s: %s", d.Direction, pod, d.Node, d.OS, verdict, by, d.Because)
}

// accessMarkdown is the comment's access section: newly denied first (as
// removed lines), capped at MarkdownAccess.
func (r *Result) accessMarkdown() string {
	var b strings.Builder
	lines := r.accessLines(MarkdownAccess)
	fmt.Fprintf(&b, "#### %s\n\n", lines[0])
	if len(lines) > 2 {
		fmt.Fprintf(&b, "_Probed: %s. Newly denied first; each with the ACL or rule that decides, before and after._\n\n", r.Access.Ports)
		b.WriteString("```diff\n")
		for _, l := range lines[2:] {
			if !strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "-") {
				l = "  " + l
			}
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n\n")
	}
	return b.String()
}
