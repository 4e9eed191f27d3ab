package vxlan_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/vxlan"
)

// cluster is a calico-vxlan cluster of linux Linux and windows Windows
// nodes (win-0 …), with VNI vni and the rollout r.
func cluster(networking intent.Networking, linux, windows, vni int, r *intent.Rollout) *intent.Cluster {
	c := &intent.Cluster{Name: "demo", Networking: networking, VXLAN: &intent.VXLAN{VNI: vni, Port: 4789}}
	c.Windows.Rollout = r
	c.Windows.NetworkOwner = intent.OwnerHnsplan
	if networking == intent.FlannelVXLAN {
		c.Windows.NetworkOwner = intent.OwnerCNI
	}
	for i := range linux {
		c.Nodes = append(c.Nodes, intent.Node{Name: fmt.Sprintf("linux-%d", i), OS: "linux"})
	}
	for i := range windows {
		c.Nodes = append(c.Nodes, intent.Node{Name: fmt.Sprintf("win-%d", i), OS: "windows",
			Labels: map[string]string{"zone": []string{"a", "a", "a", "b", "c"}[i%5]}})
	}
	return c
}

// TestCompareWindow: the waves are ⌈N/k⌉ for N Windows nodes at k =
// maxUnavailable slots (percentages rounded down, at least 1), one per
// rollout.order group that does not fill a wave, one for all-at-once
// unless another cause replaces a network; the window is the waves at
// drain + 10 s + 10 s each.
func TestCompareWindow(t *testing.T) {
	for _, tc := range []struct {
		name        string
		windows     int
		rollout     *intent.Rollout
		mixed       bool
		drain       time.Duration
		waves, secs int
		allAtOnce   bool
		alt         int // the alternative's waves, 0 for none
		atLeast     bool
	}{
		{"default one at a time", 3, nil, false, 0, 3, 150, false, 1, false},
		{"count", 5, &intent.Rollout{MaxUnavailable: "2"}, false, 0, 3, 150, false, 1, false},
		{"percentage", 10, &intent.Rollout{MaxUnavailable: "25%"}, false, 0, 5, 250, false, 1, false},          // 2 slots
		{"percentage below one", 3, &intent.Rollout{MaxUnavailable: "10%"}, false, 0, 3, 150, false, 1, false}, // floor of 1
		{"all slots", 4, &intent.Rollout{MaxUnavailable: "100%"}, false, 0, 1, 50, false, 0, false},
		{"drain time", 2, nil, false, 2 * time.Minute, 2, 280, false, 1, false},
		{"all at once", 7, &intent.Rollout{MaxUnavailable: "1", VXLANChange: plan.VXLANAllAtOnce}, false, 0, 1, 50, true, 7, false},
		{"all at once, mixed", 7, &intent.Rollout{MaxUnavailable: "1", VXLANChange: plan.VXLANAllAtOnce}, true, 0, 7, 350, false, 0, false},
		// zones a, a, a, b, c at 2 slots: ⌈3/2⌉ + 1 + 1 waves.
		{"order groups", 5, &intent.Rollout{MaxUnavailable: "2", Order: "zone"}, false, 0, 4, 200, false, 1, false},
		{"one node", 1, nil, false, 0, 1, 50, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 2, tc.windows, 4096, tc.rollout))
			h := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 2, tc.windows, 4097, tc.rollout))
			c := vxlan.Compare(b, h, vxlan.Options{Drain: tc.drain, Mixed: tc.mixed})
			if c == nil || c.Window == nil {
				t.Fatalf("no change or no window: %+v", c)
			}
			w := c.Window
			if w.Waves != tc.waves || w.Seconds != tc.secs || c.Windows.AllAtOnce != tc.allAtOnce || w.AtLeast != tc.atLeast {
				t.Errorf("waves %d, %d s, all at once %v, at least %v; want %d, %d s, %v, %v", w.Waves, w.Seconds, c.Windows.AllAtOnce, w.AtLeast, tc.waves, tc.secs, tc.allAtOnce, tc.atLeast)
			}
			switch {
			case tc.alt == 0 && w.Alternative != nil:
				t.Errorf("alternative %+v, want none", w.Alternative)
			case tc.alt != 0 && (w.Alternative == nil || w.Alternative.Waves != tc.alt):
				t.Errorf("alternative %+v, want %d waves", w.Alternative, tc.alt)
			}
			// The plans alone give the same waves, but for the order's
			// groups, which they cannot know: then "at least".
			var ps []*plan.NodePlan
			for range tc.windows {
				ps = append(ps, overlay(4097, h.Rollout))
			}
			fp := vxlan.FromPlans(ps)
			fp.Linux = h.Linux
			pc := vxlan.Compare(b, fp, vxlan.Options{Drain: tc.drain, Mixed: tc.mixed})
			if pc == nil || pc.Window.Waves > w.Waves || (tc.rollout != nil && tc.rollout.Order != "") != pc.Window.AtLeast {
				t.Errorf("from plans: %+v, want at most %d waves, at least %v", pc.Window, w.Waves, tc.rollout != nil && tc.rollout.Order != "")
			}
		})
	}
}

// overlay is a plan with an Overlay network on vni.
func overlay(vni uint32, r *plan.Rollout) *plan.NodePlan {
	return &plan.NodePlan{Networking: "calico-vxlan", Rollout: r, Network: plan.Network{Name: "Calico", Type: "Overlay",
		Ipams:    []plan.Ipam{{Subnets: []plan.Subnet{{Policies: []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: vni})}}}}},
		Policies: []plan.Policy{plan.NewPolicy(plan.VxlanPort{Port: 4789})}}}
}

// TestCompareNothing: no change to speak of when neither value changes,
// a side has no VXLAN (an L2Bridge network, a policy-only plan of the
// platform's CNI), or the owner of the network changes.
func TestCompareNothing(t *testing.T) {
	calico := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 1, 2, 4096, nil))
	moved := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 1, 2, 4097, nil))
	bgp := vxlan.FromIntent(cluster(intent.CalicoBGP, 1, 2, 4097, nil))
	flannel := vxlan.FromIntent(cluster(intent.FlannelVXLAN, 1, 2, 4097, nil))
	policyOnly := vxlan.FromPlans([]*plan.NodePlan{{Networking: "flannel-vxlan", PolicyOnly: &plan.PolicyOnly{Owner: "flanneld"}}})
	for name, pair := range map[string][2]vxlan.Side{
		"same":              {calico, calico},
		"no vxlan after":    {calico, bgp},
		"owner changes":     {calico, flannel},
		"policy-only plans": {policyOnly, policyOnly},
	} {
		if c := vxlan.Compare(pair[0], pair[1], vxlan.Options{}); c != nil {
			t.Errorf("%s: %+v, want none", name, c)
		}
	}
	if c := vxlan.Compare(calico, moved, vxlan.Options{}); c == nil {
		t.Error("a new VNI: no change")
	}
}

// TestCompareSides: what the Linux side changes and how, per owner; who is
// cut off; the port; flanneld's window is not hnsplan's.
func TestCompareSides(t *testing.T) {
	b := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 2, 3, 4096, nil))
	h := b
	h.VNI, h.Port = 4097, 4790
	c := vxlan.Compare(b, h, vxlan.Options{})
	want := []string{
		`FelixConfiguration "default" spec.vxlanVNI 4096 -> 4097, spec.vxlanPort 4789 -> 4790`,
		`$ kubectl patch felixconfiguration default --type merge -p '{"spec":{"vxlanVNI":4097,"vxlanPort":4790}}'`,
		`$ calicoctl patch felixconfiguration default -p '{"spec":{"vxlanVNI":4097,"vxlanPort":4790}}'`,
		"Linux nodes (Calico, 2)",
		"pods on Windows nodes already switched <-> pods on Windows nodes not yet switched",
		"pods on Linux nodes <-> pods on Windows nodes on the other VNI and port",
		"3 waves x about 50s = about 2m30s",
	}
	text := strings.Join(c.Lines(), "\n")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("lacks %q:\n%s", w, text)
		}
	}
	if s := c.Summary(); s != "VXLAN VNI 4096 -> 4097 and port 4789 -> 4790: pods on nodes on different VNIs or ports cannot reach each other across nodes for 3 waves of the Windows nodes' rollout, about 2m30s" {
		t.Errorf("summary %q", s)
	}

	// No Linux node: nobody to be cut off from on Linux.
	lonely := vxlan.FromIntent(cluster(intent.CalicoVXLAN, 0, 2, 4096, nil))
	moved := lonely
	moved.VNI = 4097
	if text := strings.Join(vxlan.Compare(lonely, moved, vxlan.Options{}).Lines(), "\n"); strings.Contains(text, "pods on Linux nodes <->") {
		t.Errorf("no Linux node, yet:\n%s", text)
	}

	fb := vxlan.FromIntent(cluster(intent.FlannelVXLAN, 1, 2, 4096, nil))
	fh := vxlan.FromIntent(cluster(intent.FlannelVXLAN, 1, 2, 4097, nil))
	fc := vxlan.Compare(fb, fh, vxlan.Options{})
	if fc.Window != nil || fc.Linux.Owner != vxlan.OwnerFlanneld || !strings.Contains(fc.Linux.Change, "Backend.VNI 4096 -> 4097") ||
		!strings.Contains(strings.Join(fc.Linux.Apply, "\n"), "rollout restart daemonset") {
		t.Errorf("flannel: %+v", fc)
	}
	js, err := json.Marshal(fc)
	if err != nil || !strings.Contains(string(js), `"pacing":"the flannel DaemonSets' rolling updates`) {
		t.Errorf("flannel JSON %s, %v", js, err)
	}
}

// TestLive: the live side is the FelixConfiguration "default" of the
// inventory (Calico's defaults where it does not say; a per-node one is
// not read), or, for flannel, the VNI a Node's backend-data publishes.
func TestLive(t *testing.T) {
	vni := func(v int) *int { return &v }
	felix := func(name string, v *int) intent.FelixConfig {
		return intent.FelixConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: intent.FelixConfigSpec{VXLANVNI: v}}
	}
	node := func(name, data string) intent.KubeNode {
		return intent.KubeNode{Node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{vxlan.FlannelBackendData: data}}}}
	}
	for _, tc := range []struct {
		name    string
		c       *intent.Cluster
		inv     intent.Inventory
		ok      bool
		vni     int
		changes bool
	}{
		{"no inventory", cluster(intent.CalicoVXLAN, 1, 1, 4097, nil), intent.Inventory{}, false, 0, false},
		{"felix default", cluster(intent.CalicoVXLAN, 1, 1, 4097, nil),
			intent.Inventory{Calico: intent.CalicoConfig{FelixConfigs: []intent.FelixConfig{felix("node.win-0", vni(5000)), felix("default", vni(4096))}}}, true, 4096, true},
		{"felix unset is 4096", cluster(intent.CalicoVXLAN, 1, 1, 4096, nil),
			intent.Inventory{Calico: intent.CalicoConfig{FelixConfigs: []intent.FelixConfig{felix("default", nil)}}}, true, 4096, false},
		{"flannel", cluster(intent.FlannelVXLAN, 1, 2, 4096, nil),
			intent.Inventory{Nodes: []intent.KubeNode{node("cp-1", `{"VNI":4096,"VtepMAC":"aa:bb:cc:dd:ee:ff"}`), node("win-0", `{"VNI":1,"VtepMAC":"aa:bb:cc:dd:ee:00"}`)}}, true, 1, true},
		{"flannel agrees", cluster(intent.FlannelVXLAN, 1, 2, 4096, nil),
			intent.Inventory{Nodes: []intent.KubeNode{node("cp-1", `{"VNI":4096}`), node("win-0", `not json`)}}, true, 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &intent.Intent{Cluster: tc.c, Inventory: tc.inv}
			s, src, ok := vxlan.Live(in)
			if ok != tc.ok || ok && s.VNI != tc.vni {
				t.Fatalf("Live = VNI %d (%s), %v; want %d, %v", s.VNI, src.What, ok, tc.vni, tc.ok)
			}
			if c, _ := vxlan.LiveChange(in, vxlan.Options{}); (c != nil) != tc.changes {
				t.Errorf("LiveChange = %+v, want a change: %v", c, tc.changes)
			}
		})
	}
}
