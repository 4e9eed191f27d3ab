package plan

import "testing"

func TestRolloutSlots(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		nodes int
		want  int
		err   bool
	}{
		{"", 10, 1, false},
		{"1", 10, 1, false},
		{"3", 2, 3, false}, // more than the nodes: every node at once, as asked
		{"40%", 5, 2, false},
		{"40%", 4, 1, false}, // 1.6 rounds down
		{"10%", 3, 1, false}, // 0.3 rounds down to 0, then up to the floor of 1
		{"100%", 7, 7, false},
		{"0", 5, 0, true},
		{"-1", 5, 0, true},
		{"0%", 5, 0, true},
		{"101%", 5, 0, true},
		{"1.5", 5, 0, true},
		{"%", 5, 0, true},
		{"two", 5, 0, true},
		{"+2", 5, 0, true},
		{"99999999999999999999", 5, 0, true},
	} {
		if tc.spec == "" {
			if got, err := (*Rollout)(nil).Slots(tc.nodes); got != tc.want || err != nil {
				t.Errorf("nil Rollout: Slots(%d) = %d, %v; want %d", tc.nodes, got, err, tc.want)
			}
		}
		got, err := (&Rollout{MaxUnavailable: tc.spec}).Slots(tc.nodes)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Slots(%q, %d) = %d, %v; want %d, error %v", tc.spec, tc.nodes, got, err, tc.want, tc.err)
		}
	}
}

// TestRolloutWaves: ⌈n/k⌉ turns at MaxUnavailable's pace, percentages
// rounded as Slots rounds them; one turn for a VXLAN-only change under
// all-at-once, and only for that.
func TestRolloutWaves(t *testing.T) {
	all := &Rollout{MaxUnavailable: "2", VXLANChange: VXLANAllAtOnce}
	for _, tc := range []struct {
		r         *Rollout
		nodes     int
		vxlanOnly bool
		want      int
	}{
		{nil, 3, true, 3},
		{nil, 0, true, 0},
		{&Rollout{MaxUnavailable: "2"}, 5, true, 3},
		{&Rollout{MaxUnavailable: "40%"}, 5, true, 3}, // 2 slots
		{&Rollout{MaxUnavailable: "40%"}, 4, true, 4}, // 1.6 rounds down: 1 slot
		{&Rollout{MaxUnavailable: "100%"}, 7, false, 1},
		{&Rollout{MaxUnavailable: "10"}, 7, false, 1},
		{all, 7, true, 1},
		{all, 7, false, 4}, // another cause: MaxUnavailable's pace
		{&Rollout{VXLANChange: VXLANRolling}, 7, true, 7},
	} {
		got, err := tc.r.Waves(tc.nodes, tc.vxlanOnly)
		if err != nil || got != tc.want {
			t.Errorf("%+v.Waves(%d, %v) = %d, %v; want %d", tc.r, tc.nodes, tc.vxlanOnly, got, err, tc.want)
		}
	}
	if _, err := (&Rollout{MaxUnavailable: "0"}).Waves(3, false); err == nil {
		t.Error("Waves with maxUnavailable 0: no error")
	}
}

func TestRolloutBuildRegression(t *testing.T) {
	for _, tc := range []struct {
		r    *Rollout
		hold bool
	}{{nil, false}, {&Rollout{}, false}, {&Rollout{BuildRegression: BuildProceed}, false}, {&Rollout{BuildRegression: BuildHold}, true}} {
		if got := tc.r.HoldsBuild(); got != tc.hold {
			t.Errorf("%+v.HoldsBuild() = %v, want %v", tc.r, got, tc.hold)
		}
	}
}
