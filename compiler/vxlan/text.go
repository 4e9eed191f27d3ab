package vxlan

import (
	"fmt"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// Lines renders the change for a reader, a header and indented lines
// (two spaces a level), without a trailing newline: what `hnsplan diff`
// and `hnsplan plan` print.
func (c *Change) Lines() []string {
	out := []string{fmt.Sprintf("VXLAN %s for the whole cluster (%s): every node switches, Linux and Windows", c.what(), c.Networking)}
	l := c.Linux
	who := map[string]string{OwnerCalico: "Calico", OwnerFlanneld: "flanneld"}[l.Owner]
	switch {
	case l.Owner == OwnerFlanneld:
		out = append(out, "  Linux and Windows nodes (flanneld): "+l.Change)
	case who != "" && l.Nodes >= 0:
		out = append(out, fmt.Sprintf("  Linux nodes (%s, %s): %s", who, diag.Thousands(l.Nodes), l.Change))
	case who != "":
		out = append(out, fmt.Sprintf("  Linux nodes (%s): %s", who, l.Change))
	default:
		out = append(out, "  Linux nodes: "+l.Change)
	}
	if l.Owner == OwnerCalico {
		out = append(out, "      as a merge patch, not a replace of the resource (which would drop the fields the intent does not hold):")
	}
	for _, a := range l.Apply {
		out = append(out, "      $ "+a)
	}
	out = append(out, "      "+l.Effect)
	if l.Note != "" {
		out = append(out, "      "+l.Note)
	}
	w := c.Windows
	head := fmt.Sprintf("  Windows nodes (%s, %s): %s", w.Owner, diag.Thousands(w.Nodes), w.Effect)
	if c.Window != nil && w.Nodes > 0 {
		head += fmt.Sprintf(": %s%s", atLeast(c.Window.AtLeast), plural(c.Window.Waves, "wave"))
	}
	out = append(out, head)
	out = append(out, "  cut off while the two are on different values (a node takes VXLAN packets of its own VNI, on its own port, only):")
	for _, p := range c.CutOff {
		out = append(out, "      - "+p)
	}
	out = append(out, "      not cut off: "+c.Unaffected)
	if win := c.Window; win != nil {
		out = append(out, fmt.Sprintf("  window: %s%s x about %s = about %s; %s; a drain not done within the agent's --drain-timeout (%s) halts the rollout with the nodes split, until an operator acts",
			atLeast(win.AtLeast), plural(win.Waves, "wave"), seconds(win.PerWaveSeconds), seconds(win.Seconds), win.Assumption, short(DrainTimeout)))
		if a := win.Alternative; a != nil {
			out = append(out, fmt.Sprintf("      %s: %s, about %s (docs/operations.md#changing-the-vxlan-vni-or-port)", a.Setting, plural(a.Waves, "wave"), seconds(a.Seconds)))
		}
	} else {
		out = append(out, "  window: as long as "+c.Pacing)
	}
	return out
}

// Summary is the change in one sentence, for a summary line: "VXLAN VNI
// 4096 -> 4097: " and the Outage.
func (c *Change) Summary() string {
	return "VXLAN " + c.what() + ": " + c.Outage()
}

// Outage says who is cut off from whom and for how long, in a clause.
func (c *Change) Outage() string {
	if win := c.Window; win != nil && c.Windows.Nodes > 0 {
		return fmt.Sprintf("pods on nodes on different %s cannot reach each other across nodes for %s%s of the Windows nodes' rollout, about %s",
			c.valuesPlural(), atLeast(win.AtLeast), plural(win.Waves, "wave"), seconds(win.Seconds))
	}
	return fmt.Sprintf("pods on nodes on different %s cannot reach each other across nodes until every node has switched (%s)", c.valuesPlural(), c.Pacing)
}

// Advice says what to do about the change, in a clause: for a finding.
func (c *Change) Advice() string {
	var b strings.Builder
	switch c.Linux.Owner {
	case OwnerCalico:
		fmt.Fprintf(&b, "change the Linux side during the Windows nodes' rollout, with a merge patch (%s), not by replacing the FelixConfiguration; patched halfway through, no Windows node is cut off from the Linux nodes for more than half the rollout", c.Linux.Apply[0])
	case OwnerFlanneld:
		fmt.Fprintf(&b, "change net-conf.json's Backend in kube-flannel-cfg and restart every flannel DaemonSet, Linux and Windows (%s)", c.Linux.Apply[1])
	default:
		fmt.Fprintf(&b, "switch the Linux nodes to the same %s", c.Values())
	}
	if w := c.Window; w != nil && w.Alternative != nil && !c.Windows.AllAtOnce {
		b.WriteString(`; windows.rollout.vxlanChange "all-at-once" makes it 1 wave, draining every Windows node at once`)
	}
	b.WriteString(`; hnsplan diff shows the whole change, and docs/operations.md ("Changing the VXLAN VNI or port") the safest sequence`)
	return b.String()
}

// valuesPlural is Values in the plural: "VNIs", "ports", "VNIs or ports".
func (c *Change) valuesPlural() string {
	switch {
	case c.VNI != nil && c.Port != nil:
		return "VNIs or ports"
	case c.VNI != nil:
		return "VNIs"
	}
	return "ports"
}

func atLeast(b bool) string {
	if b {
		return "at least "
	}
	return ""
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return diag.Thousands(n) + " " + noun + "s"
}
