package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// version is what the agents of one compile run, by node: the plan's
// digest and the routes it takes from its table.
type version map[string]struct {
	digest string
	routes []plan.RemoteSubnetRoute
}

// versionOf publishes objs alone and reads back what every agent takes.
func versionOf(t *testing.T, objs []*Object) version {
	t.Helper()
	c := newFakeCluster()
	c.publish(t, objs, Options{})
	live, err := ReadLive(context.Background(), c.cs, ReadOptions{Host: "https://fake"})
	if err != nil || live.Err() != nil {
		t.Fatalf("read back one publish: %v %v", err, live.Err())
	}
	v := version{}
	for _, p := range live.Plans {
		v[p.Node] = struct {
			digest string
			routes []plan.RemoteSubnetRoute
		}{p.Digest, p.RemoteSubnetRoutes()}
	}
	return v
}

// TestPublishInterruptedRollback: v1 published, then v2 (a node more, a
// policy's port changed: every plan and the route table change, at the
// same route table key), then a rollback to v1 that stops after k writes,
// for every k. After each stop, every agent either takes exactly one
// version's plan with that version's routes, or waits (plan.ErrPartMissing,
// the last good plan in force): never a plan of one with the routes of
// the other. The next publish of v1 finishes the rollback.
func TestPublishInterruptedRollback(t *testing.T) {
	v1 := testIntent{windows: 4, vni: 4096, port: 80}
	v2 := testIntent{windows: 5, vni: 4096, port: 443}
	objs1, objs2 := v1.compile(t), v2.compile(t)
	if headOf(objs1).name != headOf(objs2).name {
		t.Fatal("v1 and v2 have route tables of different names: the case under test is one name")
	}
	want1, want2 := versionOf(t, objs1), versionOf(t, objs2)
	for n, p := range want1 {
		if want2[n].digest == p.digest {
			t.Fatalf("node %s has one plan in both versions: the case under test is every plan changed", n)
		}
	}

	// How many writes a whole rollback makes.
	full := newFakeCluster()
	full.publish(t, objs1, Options{})
	full.publish(t, objs2, Options{})
	full.writes()
	full.publish(t, objs1, Options{})
	total := len(full.writes())
	if total < 4 {
		t.Fatalf("a rollback makes %d writes", total)
	}

	errKilled := errors.New("publish killed")
	for k := 0; k <= total; k++ {
		t.Run(fmt.Sprintf("stopped after %d of %d writes", k, total), func(t *testing.T) {
			c := newFakeCluster()
			c.publish(t, objs1, Options{})
			c.publish(t, objs2, Options{})
			writes := 0
			kill := func(k8stesting.Action) (bool, runtime.Object, error) {
				if writes++; writes > k {
					return true, nil, errKilled
				}
				return false, nil, nil
			}
			c.cs.PrependReactor("patch", "configmaps", kill)
			c.cs.PrependReactor("delete", "configmaps", kill)
			err := Publish(context.Background(), c.cs, objs1, Options{Out: &discard{}, ErrOut: &discard{}, Host: "https://fake"})
			if (err != nil) != (k < total) {
				t.Fatalf("publish stopped after %d writes: err %v", k, err)
			}
			taken := checkVersions(t, c.cs, want1, want2)
			if k == total && taken != len(want1) {
				t.Errorf("a whole rollback: %d nodes take v1, want %d", taken, len(want1))
			}

			// The next publish finishes it.
			c.cs.ReactionChain = c.cs.ReactionChain[2:]
			c.publish(t, objs1, Options{})
			if taken := checkVersions(t, c.cs, want1, want2); taken != len(want1) {
				t.Errorf("after the rollback is published again, %d nodes take v1, want %d", taken, len(want1))
			}
		})
	}
}

// checkVersions reads what every agent takes and fails t if one takes a
// plan with routes of another version, or refuses for a reason other than
// a wait. It returns how many take v1.
func checkVersions(t *testing.T, cs *fake.Clientset, want1, want2 version) int {
	t.Helper()
	live, err := ReadLive(context.Background(), cs, ReadOptions{Host: "https://fake"})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range live.Refused {
		if !errors.Is(err, plan.ErrPartMissing) {
			t.Errorf("refused, not waiting: %v", err)
		}
	}
	taken := 0
	for _, p := range live.Plans {
		got := p.RemoteSubnetRoutes()
		same := func(v version) bool {
			w, ok := v[p.Node]
			return ok && w.digest == p.Digest && slices.Equal(w.routes, got)
		}
		switch {
		case same(want1):
			taken++
		case same(want2):
		default:
			t.Errorf("node %s takes plan %s with routes %v: of no one version (v1 %s %v, v2 %s %v)",
				p.Node, p.Digest, got, want1[p.Node].digest, want1[p.Node].routes, want2[p.Node].digest, want2[p.Node].routes)
		}
	}
	return taken
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
