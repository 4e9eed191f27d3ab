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
