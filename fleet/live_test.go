package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// TestReadLive: what Publish wrote reads back, through the agent's
// verification, as the plans that were published, assembled with their
// parts; a plan ConfigMap an agent would refuse (edited, or naming a
// part that is gone) is named with why; the trusted-keys ConfigMap's
// absence refuses every plan, as it does in an agent given
// --trusted-keys-configmap.
func TestReadLive(t *testing.T) {
	ctx := context.Background()
	c := newFakeCluster()
	live, err := ReadLive(ctx, c.cs, ReadOptions{})
	if err != nil || len(live.Plans) != 0 || live.Err() != nil {
		t.Fatalf("nothing published: %v %+v", err, live)
	}
	objs := testIntent{windows: 3, vni: 4096, port: 80}.compile(t)
	c.publish(t, objs, Options{})
	live, err = ReadLive(ctx, c.cs, ReadOptions{})
	if err != nil || live.Err() != nil {
		t.Fatalf("published: %v %v", err, live.Err())
	}
	var got []string
	for _, p := range live.Plans {
		got = append(got, p.Node+" "+p.Digest)
		if p.Routes == nil && p.RouteTable != nil {
			t.Errorf("node %s: the plan is not assembled with its route table", p.Node)
		}
	}
	var want []string
	for _, o := range objs {
		if o.IsPlan() {
			want = append(want, o.Node+" "+o.Digest)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("read back\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	live, err = ReadLive(ctx, c.cs, ReadOptions{ClusterTrust: true})
	if err != nil || len(live.Plans) != 0 || len(live.Refused) != 3 || !errors.Is(live.Refused[0], plan.ErrNoTrustedKeys) {
		t.Errorf("no trusted-keys ConfigMap: %v %v", err, live.Err())
	}

	cms := c.cs.CoreV1().ConfigMaps(Namespace)
	cm, err := cms.Get(ctx, ConfigMapName("win-02"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[PlanKey] = strings.Replace(cm.Data[PlanKey], "4096", "4097", 1)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, headOf(objs).refs[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	live, err = ReadLive(ctx, c.cs, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := live.Err().Error()
	if len(live.Refused) < 2 || !errors.Is(live.Err(), plan.ErrDigest) || !strings.Contains(msg, "node win-02: the agent would refuse the published plan: planwatch: configmap hnsplan-system/plan-win-02: ") ||
		!strings.Contains(msg, "waiting for part "+headOf(objs).refs[0]) {
		t.Errorf("edited plan, missing shard: %v", msg)
	}
	var pe *planwatch.Error
	if !errors.As(live.Refused[0], &pe) {
		t.Errorf("a refusal is not the agent's *planwatch.Error: %#v", live.Refused[0])
	}
}
