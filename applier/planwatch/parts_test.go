package planwatch_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// A partsPub publishes a node's plan and the parts it names where a
// source reads them.
type partsPub interface {
	source(node string) planwatch.Source
	plan(t *testing.T, data, sig []byte)
	part(t *testing.T, p plan.EncodedPart, data, sig []byte) // data: p.Data unless set
	remove(t *testing.T, name string)
	where(name string) string // where a part is published, as messages say
}

// filePub publishes into a plan directory: the plan file and the parts'
// files beside it.
type filePub struct{ dir string }

func (f filePub) path() string { return filepath.Join(f.dir, "win-1.json") }

func (f filePub) source(node string) planwatch.Source {
	return &planwatch.File{Path: f.path(), Node: node, Debounce: 50 * time.Millisecond, Resync: -1}
}

func (f filePub) plan(t *testing.T, data, sig []byte) {
	if sig != nil {
		publish(t, plan.SignatureFile(f.path()), sig)
	}
	publish(t, f.path(), data)
}

func (f filePub) part(t *testing.T, p plan.EncodedPart, data, sig []byte) {
	if data == nil {
		data = p.Data
	}
	path := filepath.Join(f.dir, plan.PartFileName(p.Name))
	if sig != nil {
		publish(t, plan.SignatureFile(path), sig)
	}
	publish(t, path, data)
}

func (f filePub) remove(t *testing.T, name string) {
	if err := os.Remove(filepath.Join(f.dir, plan.PartFileName(name))); err != nil {
		t.Fatal(err)
	}
}

func (f filePub) where(name string) string { return filepath.Join(f.dir, plan.PartFileName(name)) }

// cmPub publishes ConfigMaps as hnsplan publish does: the plan in
// plan-<node>, each part in the ConfigMap of its name, labelled.
type cmPub struct {
	client kubernetes.Interface
	node   string
	resync time.Duration
	names  map[string]bool // what was created, for cleanup
}

func (c *cmPub) source(node string) planwatch.Source {
	return &planwatch.ConfigMap{Client: c.client, Node: node, Resync: c.resync}
}

func (c *cmPub) put(t *testing.T, name string, labels, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cms := c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace)
	if c.names == nil {
		c.names = map[string]bool{}
	}
	c.names[name] = true
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: planwatch.ConfigMapNamespace, Labels: labels}, Data: data}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else if err == nil {
		cm.Labels, cm.Data = labels, data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (c *cmPub) plan(t *testing.T, data, sig []byte) {
	d := map[string]string{planwatch.ConfigMapKey: string(data)}
	if sig != nil {
		d[planwatch.ConfigMapSignatureKey] = string(sig)
	}
	c.put(t, planwatch.ConfigMapName(c.node), nil, d)
}

func (c *cmPub) part(t *testing.T, p plan.EncodedPart, data, sig []byte) {
	if data == nil {
		data = p.Data
	}
	d := map[string]string{planwatch.PartConfigMapKey: string(data)}
	if sig != nil {
		d[planwatch.PartConfigMapSignatureKey] = string(sig)
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": "hnsplan", planwatch.PartLabel: planwatch.PartLabelValue(p.Kind)}
	c.put(t, p.Name, labels, d)
}

func (c *cmPub) remove(t *testing.T, name string) {
	if err := c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cmPub) where(name string) string {
	return "configmap " + planwatch.ConfigMapNamespace + "/" + name + ", label " + planwatch.PartLabel
}

// cleanup deletes what c created (t.Context is canceled by then).
func (c *cmPub) cleanup() {
	for name := range c.names {
		c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}

// A partsStep changes what is published and says what the source must
// deliver: want (nil: nothing), and of a plan, the routes it holds.
type partsStep struct {
	name   string
	do     func(t *testing.T, pub partsPub)
	want   *want
	routes []plan.RemoteSubnetRoute
}

// partsScenario is the consistency rule: a plan is delivered only with
// every part it names at the digests (the route table: the key) it names;
// otherwise the source reports what it waits for, and the caller keeps
// the last good plan.
func partsScenario(t *testing.T, cluster, node string, pub partsPub) []partsStep {
	r2, r3 := route("win-2", 2), route("win-3", 3)
	v1 := encodeRoutesIn(t, cluster, node, 1, []plan.RemoteSubnetRoute{r2}, nil)
	// win-3 joins: the table's key, and so the plan, stay the same.
	v2 := encodeRoutesIn(t, cluster, node, 1, []plan.RemoteSubnetRoute{r2, r3}, nil)
	if v1.digest != v2.digest || v1.table.Name != v2.table.Name {
		t.Fatalf("a node joining changed the plan (%s, %s) or its table's name (%s, %s)", v1.digest, v2.digest, v1.table.Name, v2.table.Name)
	}
	newShard := v2.part(t, plan.ShardName(v2.table.Name, plan.ShardOf("win-3")))
	// The VNI changes: a new table (another key and name) and a new plan.
	vni := func(id uint32) func(*plan.NodePlan) {
		return func(p *plan.NodePlan) {
			p.Network.Ipams[0].Subnets[0].Policies = []plan.Policy{plan.NewPolicy(plan.VSID{IsolationId: id})}
			vr := []plan.RemoteSubnetRoute{r2, r3}
			for i := range vr {
				vr[i].IsolationId = id
			}
			p.SetRoutes(plan.RemoteSubnetTable(p.Cluster, vr))
		}
	}
	v3 := encodeRoutesIn(t, cluster, node, 1, nil, vni(5000))
	other := encodeRoutesIn(t, cluster, node, 1, nil, vni(6000))
	if v3.table.Name == v1.table.Name || v3.digest == v1.digest {
		t.Fatal("a new VNI kept the table's name or the plan")
	}
	r5000 := []plan.RemoteSubnetRoute{r2, r3}
	for i := range r5000 {
		r5000[i].IsolationId = 5000
	}
	// A head under v3's name at another key: what a hostile or broken
	// publisher could put there.
	forged := encodeRoutesIn(t, cluster, node, 1, nil, func(p *plan.NodePlan) {
		vni(5000)(p)
		p.Routes.Key = "sha256:" + strings.Repeat("0", 64)
	})
	// A shard that holds routes (others may record only plans).
	v3shard := v3.shards()[slices.IndexFunc(v3.shards(), func(p plan.EncodedPart) bool { return bytes.Contains(p.Data, []byte(`"10.0.0.10`)) })]
	corrupt := bytes.Replace(v3shard.Data, []byte(`"10.0.0.10`), []byte(`"10.0.0.19`), 1)
	if bytes.Equal(corrupt, v3shard.Data) {
		t.Fatal("the corrupt shard is not corrupt")
	}
	// Another compile at v3's key (an edit of the plan, not of the
	// network): a table of v3's name that records another plan.
	v4 := encodeRoutesIn(t, cluster, node, 2, nil, vni(5000))
	if v4.table.Name != v3.table.Name || v4.digest == v3.digest || v4.part(t, v4.table.Name).Digest == v3.part(t, v3.table.Name).Digest {
		t.Fatal("v4 is not another plan with another table of v3's name")
	}
	old := bytes.Replace(v3.data, []byte(`"formatVersion": "2.0"`), []byte(`"formatVersion": "1.0"`), 1)

	parts := func(w withParts, kinds ...string) func(*testing.T, partsPub) {
		return func(t *testing.T, pub partsPub) {
			for _, p := range w.parts {
				if len(kinds) == 0 || slices.Contains(kinds, p.Kind) {
					pub.part(t, p, nil, nil)
				}
			}
		}
	}
	publishPlan := func(data []byte) func(*testing.T, partsPub) {
		return func(t *testing.T, pub partsPub) { pub.plan(t, data, nil) }
	}
	waitVersion := func(digest, table string) *want {
		return &want{settle: true, err: plan.ErrPartMissing, msg: "waiting for the plan and route table of one publish: plan " + digest + " for node " + node + " is not the plan its route table (shard " + plan.ShardName(v3.table.Name, plan.ShardOf(node)) + ") was published with: the table " + table}
	}
	waiting := func(part, at, digest, have string) *want {
		return &want{err: plan.ErrPartMissing, msg: "waiting for part " + part + " " + at + " " + digest + " (" + pub.where(part) + "): " + have}
	}
	return []partsStep{
		{"plan before its parts", publishPlan(v1.data),
			waiting(v1.table.Name, "with key", v1.table.Key, "not published yet; nothing is applied until the plan and its parts agree"), nil},
		{"shards, not yet the head", parts(v1, plan.KindRouteShard), nil, nil},
		{"the head", parts(v1, plan.KindRouteTable), &want{digest: v1.digest}, []plan.RemoteSubnetRoute{r2}},
		{"a table the plan does not name", parts(other), nil, nil},
		{"win-3 joins: the head before its shard", func(t *testing.T, pub partsPub) { pub.part(t, v2.part(t, v2.table.Name), nil, nil) },
			waiting(newShard.Name, "at", newShard.Digest, ""), nil},
		{"its shard: the same plan, one route more", func(t *testing.T, pub partsPub) { pub.part(t, newShard, nil, nil) },
			&want{digest: v2.digest}, []plan.RemoteSubnetRoute{r2, r3}},
		{"a new plan before its parts", publishPlan(v3.data),
			waiting(v3.table.Name, "with key", v3.table.Key, "not published yet; the last good plan and its parts stay in force"), nil},
		{"its parts", parts(v3), &want{digest: v3.digest}, r5000},
		{"a head at another key", func(t *testing.T, pub partsPub) { pub.part(t, forged.part(t, forged.table.Name), nil, nil) },
			waiting(v3.table.Name, "with key", v3.table.Key, forged.table.Key+" is published, the plan and its parts disagree until both are published"), nil},
		{"the head again", parts(v3, plan.KindRouteTable), &want{digest: v3.digest}, r5000},
		{"a shard removed", func(t *testing.T, pub partsPub) { pub.remove(t, v3shard.Name) },
			waiting(v3shard.Name, "at", v3shard.Digest, "not published yet; the last good plan and its parts stay in force"), nil},
		{"the shard back", parts(v3, plan.KindRouteShard), &want{digest: v3.digest}, r5000},
		{"a shard edited", func(t *testing.T, pub partsPub) { pub.part(t, v3shard, corrupt, nil) },
			&want{err: plan.ErrDigest, msg: "part " + v3shard.Name + " (" + pub.where(v3shard.Name) + "): digest does not match the content"}, nil},
		{"the shard restored", parts(v3, plan.KindRouteShard), &want{digest: v3.digest}, r5000},
		{"a format-1 plan", publishPlan(old), &want{err: plan.ErrMajorVersion, msg: `unsupported formatVersion "1.0"`}, nil},
		{"format 2 again", publishPlan(v3.data), &want{digest: v3.digest}, r5000},
		// A publish of v4, interrupted after the plan; then the rest.
		{"another compile's plan, at the same key, before its table", publishPlan(v4.data), waitVersion(v4.digest, "was compiled with plan "+v3.digest), nil},
		{"its table", parts(v4), &want{digest: v4.digest, settle: true}, r5000},
		// A rollback to v3, interrupted after the table; then the rest.
		{"the rollback's table before its plan", parts(v3), waitVersion(v4.digest, "was compiled with plan "+v3.digest), nil},
		{"the rollback's plan", publishPlan(v3.data), &want{digest: v3.digest}, r5000},
	}
}

// runParts runs partsScenario over pub. Quiet steps outlast a resync.
func runParts(t *testing.T, cluster, node string, pub partsPub, quiet time.Duration, ready <-chan struct{}) {
	steps := partsScenario(t, cluster, node, pub)
	ch := start(t, pub.source(node))
	expect(t, ch, want{err: planwatch.ErrAbsent})
	if ready != nil {
		select {
		case <-ready:
		case <-time.After(wait):
			t.Fatal("the informers did not start watching")
		}
	}
	for i, s := range steps {
		t.Logf("step %d: %s", i, s.name)
		s.do(t, pub)
		if s.want == nil {
			expectQuiet(t, ch, quiet)
			continue
		}
		u := expect(t, ch, *s.want)
		if u.Plan == nil {
			continue
		}
		if got := u.Plan.RemoteSubnetRoutes(); !slices.EqualFunc(got, s.routes, func(a, b plan.RemoteSubnetRoute) bool { return a == b }) {
			t.Errorf("routes %v, want %v", got, s.routes)
		}
		if err := plan.Validate(u.Plan); err != nil {
			t.Errorf("delivered a plan that does not validate: %v", err)
		}
	}
}

func TestPartsFile(t *testing.T) {
	runParts(t, "demo", "win-1", filePub{dir: t.TempDir()}, 300*time.Millisecond, nil)
}

func TestPartsConfigMapFake(t *testing.T) {
	client := fake.NewClientset()
	ready := watchingBoth(client)
	pub := &cmPub{client: client, node: "win-1", resync: -1}
	runParts(t, "demo", "win-1", pub, 500*time.Millisecond, ready)
}

// TestPartsSigned: with a Trust, a route table's head must be signed like
// the plan (a plan names its table by key, so only the head's signature
// proves the routes); shards and chunks are covered by digests.
func TestPartsSigned(t *testing.T) {
	for _, tc := range []struct {
		name string
		pub  func(t *testing.T) (partsPub, <-chan struct{})
	}{
		{"file", func(t *testing.T) (partsPub, <-chan struct{}) { return filePub{dir: t.TempDir()}, nil }},
		{"configmap", func(t *testing.T) (partsPub, <-chan struct{}) {
			client := fake.NewClientset()
			return &cmPub{client: client, node: "win-1", resync: -1}, watchingBoth(client)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := signingKey(1), signingKey(2)
			pub, ready := tc.pub(t)
			v := encodeRoutes(t, "win-1", 1, []plan.RemoteSubnetRoute{route("win-2", 2)}, nil)
			head := v.part(t, v.table.Name)
			src := pub.source("win-1")
			switch s := src.(type) {
			case *planwatch.File:
				s.Trust = planwatch.NewTrust(ring(a))
			case *planwatch.ConfigMap:
				s.Trust = planwatch.NewTrust(ring(a))
			}
			ch := start(t, src)
			expect(t, ch, want{err: planwatch.ErrAbsent})
			if ready != nil {
				<-ready
			}
			for _, p := range v.shards() {
				pub.part(t, p, nil, nil)
			}
			pub.part(t, head, nil, nil) // unsigned
			pub.plan(t, v.data, plan.Sign(v.data, a))
			expectSkipping(t, ch, want{err: plan.ErrUnsigned, msg: "route table " + v.table.Name + " refused: "}, true)
			pub.part(t, head, nil, plan.Sign(head.Data, b))
			expect(t, ch, want{err: plan.ErrUntrustedSigner, msg: fp(b)})
			pub.part(t, head, nil, plan.Sign(head.Data, a))
			expect(t, ch, want{digest: v.digest})
		})
	}
}

// watchingBoth returns a channel closed once the fake client has started
// the two watches of a ConfigMap source: the fake has no resource
// versions, so a change made between an informer's list and its watch
// would be lost.
func watchingBoth(client *fake.Clientset) <-chan struct{} {
	ready := make(chan struct{})
	var n atomic.Int32
	client.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) {
		if n.Add(1) == 2 {
			close(ready)
		}
		return false, nil, nil
	})
	return ready
}
