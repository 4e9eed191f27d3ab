package vxlan

import (
	"fmt"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Options are what Compare needs besides the two sides.
type Options struct {
	// Drain is how long a node's pods take to leave (DefaultDrain when
	// zero): the part of a wave that depends on the workload.
	Drain time.Duration
	// Mixed says some Windows network is replaced for another cause too
	// (its subnet, type or name): all-at-once does not apply to it.
	Mixed bool
}

// Move is a value before and after.
type Move struct {
	Before int `json:"before"`
	After  int `json:"after"`
}

// Change is a change of the cluster's VXLAN VNI or port: what each OS's
// nodes do, who is cut off from whom meanwhile, and for how long.
type Change struct {
	Networking string `json:"networking"`
	// VNI and Port are set when they change.
	VNI  *Move `json:"vni,omitempty"`
	Port *Move `json:"port,omitempty"`
	// Linux is what changes on the Linux nodes and how to apply it.
	Linux Linux `json:"linux"`
	// Windows is how the Windows nodes switch.
	Windows Windows `json:"windows"`
	// CutOff are the pairs of nodes whose pods cannot reach each other
	// while the two are on different values; Unaffected what still works.
	CutOff     []string `json:"cutOff"`
	Unaffected string   `json:"unaffected"`
	// Window is how long the Windows nodes take to switch, at the pace
	// hnsplan's agents keep; nil when hnsplan paces nothing (flanneld).
	Window *Window `json:"window,omitempty"`
	// Pacing says what paces the switch when Window is nil.
	Pacing string `json:"pacing,omitempty"`
}

// Linux is the Linux side of a Change.
type Linux struct {
	// Owner programs the Linux nodes' VXLAN: OwnerCalico, OwnerFlanneld,
	// or "" when the intent does not say.
	Owner string `json:"owner,omitempty"`
	// Nodes counts them; -1 when unknown (a diff of plan directories).
	Nodes int `json:"nodes"`
	// Change is the setting that changes, with its values.
	Change string `json:"change"`
	// Apply are the commands that apply it (alternatives, in order).
	Apply []string `json:"apply,omitempty"`
	// Effect is what the nodes then do; Note what else to look at.
	Effect string `json:"effect"`
	Note   string `json:"note,omitempty"`
}

// Windows is the Windows side of a Change.
type Windows struct {
	// Owner programs their VXLAN network: OwnerHnsplan or OwnerFlanneld.
	Owner string `json:"owner"`
	Nodes int    `json:"nodes"`
	// MaxUnavailable is windows.rollout.maxUnavailable ("1" by default)
	// and Slots what it comes to for Nodes; AllAtOnce says every node
	// switches in one wave (windows.rollout.vxlanChange all-at-once, for a
	// change of the VXLAN identity alone).
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
	Slots          int    `json:"slots,omitempty"`
	AllAtOnce      bool   `json:"allAtOnce,omitempty"`
	// Effect says what they do.
	Effect string `json:"effect"`
}

// Window is how long the Windows nodes' switch takes: Waves turns of
// PerWave each, Waves × PerWave in all. An estimate, on the Assumption
// it states.
type Window struct {
	Waves int `json:"waves"`
	// AtLeast says Waves is a floor: rollout.order's groups, unknown here
	// (plans hold no labels), can only add waves.
	AtLeast        bool   `json:"atLeast,omitempty"`
	PerWaveSeconds int    `json:"perWaveSeconds"`
	Seconds        int    `json:"seconds"`
	Assumption     string `json:"assumption"`
	// Alternative is the other pace's window: all-at-once's for a rolling
	// change, rolling's for an all-at-once one; nil when they are the
	// same (one Windows node, another cause of replace).
	Alternative *Alternative `json:"alternative,omitempty"`
}

// Alternative is the window at the other pace, and the setting it takes.
type Alternative struct {
	Setting string `json:"setting"`
	Waves   int    `json:"waves"`
	Seconds int    `json:"seconds"`
}

// Compare is the change from one side to the other, nil when there is
// none to speak of: neither VNI nor port changes, or a side does not
// network its Windows nodes with VXLAN, or the owner of their network
// changes (a new network, not a new VNI: diff says so node by node).
func Compare(before, after Side, o Options) *Change {
	if !before.VXLAN || !after.VXLAN || before.Owner != after.Owner || linuxOwner(before) != linuxOwner(after) ||
		before.VNI == after.VNI && before.Port == after.Port {
		return nil
	}
	if o.Drain <= 0 {
		o.Drain = DefaultDrain
	}
	c := &Change{Networking: after.Networking}
	if before.VNI != after.VNI {
		c.VNI = &Move{before.VNI, after.VNI}
	}
	if before.Port != after.Port {
		c.Port = &Move{before.Port, after.Port}
	}
	c.Linux = c.linux(linuxOwner(after), after.Linux)
	c.Windows = Windows{Owner: after.Owner, Nodes: after.Windows}
	if after.Owner == OwnerFlanneld {
		c.Windows.Effect = "flanneld owns their networks: hnsplan's plans do not change, and hnsplan paces nothing"
		c.CutOff = []string{"pods on nodes whose flanneld has restarted with the new values <-> pods on nodes whose flanneld has not, Linux and Windows alike"}
		c.Unaffected = "pods on the same node, and traffic outside the VXLAN overlay (node addresses, NAT to outside the cluster)"
		c.Pacing = "the flannel DaemonSets' rolling updates (their updateStrategy), which hnsplan does not see"
		return c
	}
	c.windows(after, o)
	return c
}

// what names the values that change: "VNI 4096 -> 4097", "port 4789 ->
// 4790", or both.
func (c *Change) what() string {
	var parts []string
	if c.VNI != nil {
		parts = append(parts, fmt.Sprintf("VNI %d -> %d", c.VNI.Before, c.VNI.After))
	}
	if c.Port != nil {
		parts = append(parts, fmt.Sprintf("port %d -> %d", c.Port.Before, c.Port.After))
	}
	return strings.Join(parts, " and ")
}

// Values names what changes: "VNI", "port", "VNI and port".
func (c *Change) Values() string {
	switch {
	case c.VNI != nil && c.Port != nil:
		return "VNI and port"
	case c.VNI != nil:
		return "VNI"
	}
	return "port"
}

func (c *Change) linux(owner string, nodes int) Linux {
	l := Linux{Owner: owner, Nodes: nodes}
	switch owner {
	case OwnerCalico:
		var fields, patch []string
		if c.VNI != nil {
			fields = append(fields, fmt.Sprintf("spec.vxlanVNI %d -> %d", c.VNI.Before, c.VNI.After))
			patch = append(patch, fmt.Sprintf(`"vxlanVNI":%d`, c.VNI.After))
		}
		if c.Port != nil {
			fields = append(fields, fmt.Sprintf("spec.vxlanPort %d -> %d", c.Port.Before, c.Port.After))
			patch = append(patch, fmt.Sprintf(`"vxlanPort":%d`, c.Port.After))
		}
		p := `{"spec":{` + strings.Join(patch, ",") + `}}`
		l.Change = `FelixConfiguration "default" ` + strings.Join(fields, ", ")
		l.Apply = []string{
			"kubectl patch felixconfiguration default --type merge -p '" + p + "'",
			"calicoctl patch felixconfiguration default -p '" + p + "'",
		}
		l.Effect = "Felix on each Linux node restarts when its configuration changes (all but a few settings restart it, these among them), " +
			"finds its vxlan.calico device with the old " + c.Values() + ", and deletes and recreates it with the new: every Linux node at about the same time, " +
			"in the seconds a restart and resync take"
		l.Note = "a FelixConfiguration node.<name> that sets the " + c.Values() + " overrides \"default\" for its node: patch it too"
	case OwnerFlanneld:
		var fields, backend []string
		if c.VNI != nil {
			fields = append(fields, fmt.Sprintf("Backend.VNI %d -> %d", c.VNI.Before, c.VNI.After))
			backend = append(backend, fmt.Sprintf(`"VNI":%d`, c.VNI.After))
		}
		if c.Port != nil {
			fields = append(fields, fmt.Sprintf("Backend.Port %d -> %d", c.Port.Before, c.Port.After))
			backend = append(backend, fmt.Sprintf(`"Port":%d`, c.Port.After))
		}
		l.Change = "net-conf.json " + strings.Join(fields, ", ") + ` (the ConfigMap kube-flannel-cfg; Backend {"Type":"vxlan",` + strings.Join(backend, ",") + `,...})`
		l.Apply = []string{"kubectl -n kube-flannel edit configmap kube-flannel-cfg",
			"kubectl -n kube-flannel rollout restart daemonset"}
		l.Effect = "flanneld reads net-conf.json only when it starts: restart every flannel DaemonSet, Linux and Windows; each flanneld then " +
			"makes its VXLAN device (Linux: flannel.<VNI>) or HNS network (Windows: named by Backend.Name, flannel.<VNI> by default: with a new VNI, " +
			"a new network, which the Windows nodes' CNI configuration must name) with the new values; on Windows flanneld takes only a VNI of 4096 or more and port 4789"
	default:
		l.Change = "the Linux nodes' VXLAN " + c.Values()
		l.Effect = "networking " + c.Networking + " leaves the Linux nodes' VXLAN to you: switch them to the same " + c.Values()
	}
	return l
}

// windows fills in the Windows side, the pairs cut off and the window of
// an hnsplan-owned change.
func (c *Change) windows(s Side, o Options) {
	w := &c.Windows
	n := s.Windows
	w.MaxUnavailable = plan.DefaultMaxUnavailable
	if s.Rollout != nil && s.Rollout.MaxUnavailable != "" {
		w.MaxUnavailable = s.Rollout.MaxUnavailable
	}
	slots, err := s.Rollout.Slots(n)
	if err != nil {
		slots = 1 // the plans' validation refuses it; the slowest pace here
	}
	w.Slots = slots
	w.AllAtOnce = s.Rollout.AllAtOnce() && !o.Mixed
	rolling := waves(s, slots)
	win := &Window{Waves: rolling, AtLeast: s.Rollout != nil && s.Rollout.Order != "" && s.Groups == nil}
	if w.AllAtOnce {
		win.Waves, win.AtLeast = 1, false
	}
	if n == 0 {
		win.Waves = 0
	}
	per := o.Drain + Recreate + SlotPoll
	win.PerWaveSeconds = int(per / time.Second)
	win.Seconds = win.Waves * win.PerWaveSeconds
	win.Assumption = fmt.Sprintf("a wave is a %s drain (--drain-time: the pods' terminationGracePeriodSeconds), %s to recreate the network and its routes, and up to %s for the next node to find a slot free (the agent's slot poll)",
		short(o.Drain), short(Recreate), short(SlotPoll))
	switch {
	case w.AllAtOnce && rolling > 1:
		win.Alternative = &Alternative{Setting: fmt.Sprintf(`windows.rollout.vxlanChange: "rolling" (maxUnavailable %s)`, w.MaxUnavailable),
			Waves: rolling, Seconds: rolling * win.PerWaveSeconds}
	case !w.AllAtOnce && !o.Mixed && win.Waves > 1:
		win.Alternative = &Alternative{Setting: `windows.rollout.vxlanChange: "all-at-once"`, Waves: 1, Seconds: win.PerWaveSeconds}
	}
	c.Window = win

	switch {
	case n == 0:
		w.Effect = "none: the intent has no Windows node"
	case w.AllAtOnce:
		w.Effect = fmt.Sprintf("all %s drain and recreate their networks at once (windows.rollout.vxlanChange all-at-once): every Windows pod is evicted at the same time, and waits for a node to come back", diag.Thousands(n))
	default:
		pace := fmt.Sprintf("%s at a time (maxUnavailable %s)", diag.Thousands(slots), w.MaxUnavailable)
		if slots >= n {
			pace = fmt.Sprintf("all at once (maxUnavailable %s)", w.MaxUnavailable)
		}
		if s.Rollout != nil && s.Rollout.Order != "" {
			pace += ", group by group of " + s.Rollout.Order
		}
		w.Effect = "each drains and recreates its network, " + pace
		if s.Rollout.AllAtOnce() && o.Mixed {
			w.Effect += "; windows.rollout.vxlanChange all-at-once does not apply: another cause than the VXLAN " + c.Values() + " replaces a network"
		}
	}

	other := "the other " + c.Values()
	if n > 1 && !w.AllAtOnce {
		c.CutOff = append(c.CutOff, "pods on Windows nodes already switched <-> pods on Windows nodes not yet switched")
	}
	if c.Linux.Nodes != 0 && n > 0 {
		linux := "the Linux side's change"
		switch c.Linux.Owner {
		case OwnerCalico:
			linux = "the FelixConfiguration patch"
		case "":
			linux = "the Linux nodes' switch"
		}
		c.CutOff = append(c.CutOff, fmt.Sprintf("pods on Linux nodes <-> pods on Windows nodes on %s: each Windows node from %s until its own replace, or from its replace until %s", other, linux, linux))
	}
	c.Unaffected = "Linux <-> Linux (they switch together), pods on the same node, and traffic outside the VXLAN overlay (node addresses, NAT to outside the cluster)"
}

// waves is how many turns the Windows nodes take at slots a turn:
// rollout.order's groups each fill whole turns.
func waves(s Side, slots int) int {
	if slots < 1 {
		slots = 1
	}
	if len(s.Groups) == 0 {
		return (s.Windows + slots - 1) / slots
	}
	total := 0
	for _, g := range s.Groups {
		total += (g + slots - 1) / slots
	}
	return total
}

// short formats d the way people write durations: 30s, 2m30s, 1h5m.
func short(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

func seconds(n int) string { return short(time.Duration(n) * time.Second) }
