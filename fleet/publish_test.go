package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// testIntent is a small calico-vxlan cluster: windows Windows nodes
// (win-01, …), one Linux node, VXLAN VNI vni, and one NetworkPolicy
// allowing port, so that the plans share a route table and a program.
type testIntent struct {
	windows int
	vni     int
	port    int
}

// compile writes the intent, compiles it and returns its ConfigMaps as
// Objects makes them.
func (ti testIntent) compile(t testing.TB) []*Object {
	t.Helper()
	dir := t.TempDir()
	var nodes strings.Builder
	nodes.WriteString("\t\t\"linux-1\": {os: \"linux\", address: \"10.240.0.10/24\"}\n")
	for i := 1; i <= ti.windows; i++ {
		fmt.Fprintf(&nodes, "\t\t\"win-%02d\": {os: \"windows\", address: \"10.240.0.%d/24\", maxPods: 60, windows: build: \"10.0.17763.1432\"}\n", i, 20+i)
	}
	files := map[string]string{
		"cluster.cue": fmt.Sprintf(`package cluster

cluster: {
	name:       "demo"
	datastore:  "kubernetes"
	networking: "calico-vxlan"
	serviceCIDRs: ["10.96.0.0/12"]
	ipam: strictAffinity: true
	vxlan: vni: %d
	pools: default: cidr: "192.168.0.0/16"
	nodes: {
%s	}
}
`, ti.vni, nodes.String()),
		"policy.yaml": fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: app}
spec:
  podSelector: {matchLabels: {role: web}}
  policyTypes: [Ingress]
  ingress:
  - ports: [{port: %d}]
`, ti.port),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, findings, err := compiler.Build(dir, compiler.Options{})
	if err != nil || findings.HasErrors() || !res.Compiled() {
		t.Fatalf("compile: %v %v", err, findings)
	}
	files2, err := compiler.EncodePlans(res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(files2, res.Plans)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// fakeCluster is a fake API server that records the writes to ConfigMaps.
type fakeCluster struct {
	cs *fake.Clientset
}

func newFakeCluster() *fakeCluster { return &fakeCluster{cs: fake.NewClientset()} }

// publish runs publish and returns its output; it fails t on an error.
func (c *fakeCluster) publish(t *testing.T, objs []*Object, opts Options) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Out, opts.ErrOut, opts.Host = &out, &errOut, "https://fake"
	if err := Publish(context.Background(), c.cs, objs, opts); err != nil {
		t.Fatalf("publish: %v\n%s", err, out.String())
	}
	return out.String(), errOut.String()
}

// writes returns the writes to ConfigMaps since the last call, as
// "verb name", in order.
func (c *fakeCluster) writes() []string {
	var out []string
	for _, a := range c.cs.Actions() {
		if a.GetResource().Resource != "configmaps" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.PatchAction:
			out = append(out, "apply "+a.GetName())
		case k8stesting.DeleteAction:
			out = append(out, "delete "+a.GetName())
		case k8stesting.CreateAction, k8stesting.UpdateAction:
			out = append(out, a.GetVerb()+" ?")
		}
	}
	c.cs.ClearActions()
	return out
}

func (c *fakeCluster) names(t *testing.T) []string {
	t.Helper()
	list, err := c.cs.CoreV1().ConfigMaps(Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	slices.Sort(out)
	return out
}

func namesOf(objs []*Object, keep func(o *Object) bool) []string {
	var out []string
	for _, o := range objs {
		if keep(o) {
			out = append(out, o.name)
		}
	}
	slices.Sort(out)
	return out
}

func all(*Object) bool { return true }

func headOf(objs []*Object) *Object {
	for _, o := range objs {
		if o.Kind == plan.KindRouteTable {
			return o
		}
	}
	return nil
}

// TestPublishWrites: a first publish writes every part before any head
// and every head before any plan; publishing the same again writes
// nothing; a node added to the intent writes its plan, its shard and the
// head, and nothing else.
func TestPublishWrites(t *testing.T) {
	c := newFakeCluster()
	base := testIntent{windows: 6, vni: 4096, port: 80}
	objs := base.compile(t)
	out, _ := c.publish(t, objs, Options{})
	w := c.writes()
	if len(w) != len(objs) {
		t.Fatalf("first publish: %d writes for %d objects: %v", len(w), len(objs), w)
	}
	checkOrder(t, w, objs)
	if !strings.Contains(out, fmt.Sprintf("published 6 plans and %s to %s on https://fake: %d created, 0 updated, 0 unchanged\n", plural(len(objs)-6, "part"), Namespace, len(objs))) {
		t.Errorf("first publish:\n%s", out)
	}
	if got, want := c.names(t), namesOf(objs, all); !slices.Equal(got, want) {
		t.Errorf("ConfigMaps %v, want %v", got, want)
	}
	cm, err := c.cs.CoreV1().ConfigMaps(Namespace).Get(context.Background(), headOf(objs).name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[LabelPart] != "routetable" || cm.Labels[LabelManagedBy] != "hnsplan" || cm.Annotations[AnnotationDigest] != headOf(objs).Digest || cm.Data[PartKey] != string(headOf(objs).Data) {
		t.Errorf("head ConfigMap: labels %v, annotations %v, keys %d", cm.Labels, cm.Annotations, len(cm.Data))
	}

	out, _ = c.publish(t, objs, Options{})
	if w := c.writes(); len(w) != 0 {
		t.Errorf("publishing the same again wrote %v", w)
	}
	if !strings.Contains(out, fmt.Sprintf("0 created, 0 updated, %d unchanged\n", len(objs))) {
		t.Errorf("second publish:\n%s", out)
	}

	grown := base
	grown.windows++
	objs2 := grown.compile(t)
	out, _ = c.publish(t, objs2, Options{})
	w = c.writes()
	checkOrder(t, w, objs2)
	want := []string{"apply " + headOf(objs2).name, "apply " + plan.ShardName(headOf(objs2).name, plan.ShardOf("win-07")), "apply plan-win-07"}
	if !sameWrites(w, want) {
		t.Errorf("one node added: writes %v, want %v\n%s", w, want, out)
	}
}

// TestPublishCanaryParts: a canary publishes the parts its plans name and
// keeps those the other nodes' plans still name; publishing to all then
// prunes them, heads before their shards; a new route table key goes the
// same way.
func TestPublishCanaryParts(t *testing.T) {
	c := newFakeCluster()
	v1 := testIntent{windows: 4, vni: 4096, port: 80}
	objs1 := v1.compile(t)
	c.publish(t, objs1, Options{})
	c.writes()
	chunks1 := namesOf(objs1, func(o *Object) bool { return o.Kind == plan.KindProgramChunk })
	if len(chunks1) == 0 {
		t.Fatal("the intent has no program chunk")
	}

	// A new policy program, to one node first.
	v2 := v1
	v2.port = 443
	objs2 := v2.compile(t)
	chunks2 := namesOf(objs2, func(o *Object) bool { return o.Kind == plan.KindProgramChunk })
	out, _ := c.publish(t, objs2, Options{Sel: Selection{Canary: 1}})
	w := c.writes()
	// The route table records every plan of the new compile, so its
	// shards and head go too: the held-back nodes, whose plans it does not
	// record, keep their last good plan and table until theirs come.
	was := map[string]string{}
	for _, o := range objs1 {
		was[o.name] = o.Digest
	}
	want := prefixed("apply ", chunks2)
	for _, o := range objs2 {
		if (o.Kind == plan.KindRouteShard || o.Kind == plan.KindRouteTable) && was[o.name] != o.Digest {
			want = append(want, "apply "+o.name)
		}
	}
	if len(want) < len(chunks2)+2 {
		t.Fatalf("the new compile changed no route shard: %v", want)
	}
	want = append(want, "apply plan-win-01")
	checkOrder(t, w, objs1, objs2)
	if !sameWrites(w, want) {
		t.Errorf("canary: writes %v, want %v\n%s", w, want, out)
	}
	if !strings.Contains(out, "plan-win-02: held back, would be updated (--canary 1") || strings.Contains(out, "pruned") {
		t.Errorf("canary:\n%s", out)
	}
	for _, name := range chunks1 {
		if !slices.Contains(c.names(t), name) {
			t.Errorf("the canary deleted %s, which the other nodes' plans name", name)
		}
	}

	// To all: the old chunks go.
	out, _ = c.publish(t, objs2, Options{})
	w = c.writes()
	want = []string{"apply plan-win-02", "apply plan-win-03", "apply plan-win-04"}
	want = append(want, prefixed("delete ", chunks1)...)
	checkOrder(t, w, objs1, objs2)
	if !sameWrites(w, want) {
		t.Errorf("all: writes %v, want %v\n%s", w, want, out)
	}
	for _, name := range chunks1 {
		if !strings.Contains(out, "configmap hnsplan-system/"+name+": pruned, no plan names it\n") {
			t.Errorf("no pruned line for %s:\n%s", name, out)
		}
	}
	if got, want := c.names(t), namesOf(objs2, all); !slices.Equal(got, want) {
		t.Errorf("ConfigMaps %v, want %v", got, want)
	}

	// A new VNI is a new route table key: a new table, whole, for the
	// canary; the old one stays for the others, then goes, head first.
	v3 := v2
	v3.vni = 4097
	objs3 := v3.compile(t)
	old, head := headOf(objs2), headOf(objs3)
	if old.name == head.name {
		t.Fatal("a new VNI kept the route table's name")
	}
	c.publish(t, objs3, Options{Sel: Selection{Nodes: []string{"win-03"}}})
	w = c.writes()
	want = append(prefixed("apply ", head.refs), "apply "+head.name, "apply plan-win-03")
	checkOrder(t, w, objs2, objs3)
	if !sameWrites(w, want) {
		t.Errorf("--nodes win-03: writes %v, want %v", w, want)
	}
	for _, name := range append([]string{old.name}, old.refs...) {
		if !slices.Contains(c.names(t), name) {
			t.Errorf("--nodes win-03 deleted %s, which the other nodes' plans name", name)
		}
	}
	c.publish(t, objs3, Options{})
	w = c.writes()
	want = []string{"apply plan-win-01", "apply plan-win-02", "apply plan-win-04", "delete " + old.name}
	want = append(want, prefixed("delete ", old.refs)...)
	checkOrder(t, w, objs2, objs3)
	if !sameWrites(w, want) {
		t.Errorf("all, new key: writes %v, want %v", w, want)
	}
	if got, want := c.names(t), namesOf(objs3, all); !slices.Equal(got, want) {
		t.Errorf("ConfigMaps %v, want %v", got, want)
	}
}

// sameWrites compares writes as sets: those of one phase are made
// concurrently (checkOrder checks the phases).
func sameWrites(got, want []string) bool { return slices.Equal(sorted(got), sorted(want)) }

// checkOrder checks that the applies in w come phase by phase (parts,
// heads, plans), and the deletes after them, heads first.
func checkOrder(t *testing.T, w []string, objs ...[]*Object) {
	t.Helper()
	rank := map[string]int{}
	for _, os := range objs {
		for _, o := range os {
			rank["apply "+o.name] = o.phase()
			rank["delete "+o.name] = 3
			if o.Kind == plan.KindRouteShard || o.Kind == plan.KindProgramChunk {
				rank["delete "+o.name] = 4
			}
		}
	}
	for i := 1; i < len(w); i++ {
		if rank[w[i]] < rank[w[i-1]] {
			t.Errorf("%s comes after %s: a reader could find an object naming what is not there: %v", w[i], w[i-1], w)
		}
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// TestPublishPruneEvidence: parts are deleted only on positive evidence.
// A plan ConfigMap whose plan cannot be read keeps every part; a stale
// plan ConfigMap keeps the parts it names until --prune deletes it; a
// ConfigMap hnsplan did not label is never deleted.
func TestPublishPruneEvidence(t *testing.T) {
	ctx := context.Background()
	c := newFakeCluster()
	v1 := testIntent{windows: 3, vni: 4096, port: 80}
	objs1 := v1.compile(t)
	c.publish(t, objs1, Options{})
	chunks1 := namesOf(objs1, func(o *Object) bool { return o.Kind == plan.KindProgramChunk })
	cms := c.cs.CoreV1().ConfigMaps(Namespace)

	// win-03 leaves the cluster, and the program changes: the stale plan
	// of win-03 still names the old chunks.
	v2 := testIntent{windows: 2, vni: 4096, port: 443}
	objs2 := v2.compile(t)
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "program-0123456789ab", Namespace: Namespace,
		Labels: map[string]string{LabelPart: "programchunk"}}}
	if _, err := cms.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.writes()
	out, _ := c.publish(t, objs2, Options{})
	if !strings.Contains(out, "plan-win-03: stale, no plan for node win-03 (--prune deletes it)") {
		t.Errorf("no stale line:\n%s", out)
	}
	// The shard that held only win-03 goes: the head names it no more
	// (the stale plan names the head by name and key, not a version).
	// The old chunks stay: the stale plan names them.
	gone := plan.ShardName(headOf(objs1).name, plan.ShardOf("win-03"))
	if slices.Contains(headOf(objs2).refs, gone) {
		t.Fatalf("win-03 shares its shard %s with another node; rename the nodes", gone)
	}
	if w := c.writes(); !slices.Contains(w, "delete "+gone) || !strings.Contains(out, gone+": pruned, no plan names it\n") || strings.Count(out, "pruned") != 2 {
		t.Errorf("the shard of win-03 was not pruned, or more was: %v\n%s", w, out)
	}
	for _, name := range append(chunks1, foreign.Name) {
		if !slices.Contains(c.names(t), name) {
			t.Errorf("%s was deleted", name)
		}
	}

	// A plan ConfigMap that holds no readable plan: nothing is pruned,
	// and stderr says why.
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plan-win-09", Namespace: Namespace},
		Data: map[string]string{PlanKey: "not json"}}
	if _, err := cms.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.writes()
	out, errOut := c.publish(t, objs2, Options{Prune: true})
	if w := c.writes(); !slices.Equal(w, []string{"delete plan-win-03"}) {
		t.Errorf("--prune beside an unreadable plan: writes %v\n%s", w, out)
	}
	if !strings.Contains(errOut, "no part pruned: configmap hnsplan-system/plan-win-09 holds no plan hnsplan can read") {
		t.Errorf("stderr: %s", errOut)
	}

	// Without it, --prune deletes the stale plan and the parts only it
	// named go with it; the unlabelled ConfigMap stays.
	if err := cms.Delete(ctx, bad.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.writes()
	out, _ = c.publish(t, objs2, Options{Prune: true})
	w := c.writes()
	if want := prefixed("delete ", chunks1); !slices.Equal(w, want) {
		t.Errorf("writes %v, want %v\n%s", w, want, out)
	}
	if !strings.Contains(out, fmt.Sprintf(", 0 pruned, %s pruned\n", plural(len(chunks1), "part"))) {
		t.Errorf("summary:\n%s", out)
	}
	if got, want := c.names(t), append(namesOf(objs2, all), foreign.Name); !slices.Equal(got, sorted(want)) {
		t.Errorf("ConfigMaps %v, want %v", got, sorted(want))
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestPublishObjectsRefuses: what cannot be published is refused before
// anything is sent, every problem at once, each saying what and what to
// do.
func TestPublishObjectsRefuses(t *testing.T) {
	base := testIntent{windows: 2, vni: 4096, port: 80}
	objs := base.compile(t)
	var files []compiler.File
	for _, o := range objs {
		files = append(files, o.File)
	}
	plans := make([]*plan.NodePlan, 0)
	for _, o := range objs {
		if o.IsPlan() {
			p, err := plan.Decode(o.Data, o.Node)
			if err != nil {
				t.Fatal(err)
			}
			plans = append(plans, p)
		}
	}
	edit := func(f func(files []compiler.File) []compiler.File) []compiler.File {
		c := slices.Clone(files)
		return f(c)
	}
	index := func(files []compiler.File, kind string) int {
		return slices.IndexFunc(files, func(f compiler.File) bool { return f.Kind == kind })
	}
	cases := []struct {
		name  string
		files []compiler.File
		want  []string
	}{
		{"as compiled", files, nil},
		{"plan too large", edit(func(fs []compiler.File) []compiler.File {
			i := index(fs, plan.Kind)
			fs[i].Data = bytes.Repeat([]byte{' '}, MaxObject)
			return fs
		}), []string{"the plan of node win-01 is 262153 bytes (256.0 KiB) with its keys and signature; a published ConfigMap holds at most 262144 bytes (256 KiB): the plan holds its own network, host endpoint and pod template"}},
		{"signature over the limit", edit(func(fs []compiler.File) []compiler.File {
			i := index(fs, plan.KindProgramChunk)
			fs[i].Data = bytes.Repeat([]byte{' '}, MaxObject-len(PartKey))
			fs[i].Signature = []byte("sig")
			return fs
		}), []string{"part program-", "(ProgramChunk) is 262160 bytes", "compile it again with this hnsplan"}},
		{"part missing", edit(func(fs []compiler.File) []compiler.File {
			i := index(fs, plan.KindProgramChunk)
			return slices.Delete(fs, i, i+1)
		}), []string{"the plan of node win-01 names part program-", "(ProgramChunk), which is not among the parts to publish: compile again", "the plan of node win-02 names"}},
		{"shard missing", edit(func(fs []compiler.File) []compiler.File {
			i := index(fs, plan.KindRouteShard)
			return slices.Delete(fs, i, i+1)
		}), []string{"route table routes-", "names part routes-", "(RouteShard), which is not among"}},
		{"bad part name", edit(func(fs []compiler.File) []compiler.File {
			i := index(fs, plan.KindProgramChunk)
			fs[i].Part = "program-NOPE"
			return fs
		}), []string{`"program-NOPE" is not a part name`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Objects(tc.files, plans)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}
