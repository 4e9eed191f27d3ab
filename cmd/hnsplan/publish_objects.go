package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// A pubObject is one ConfigMap publish writes: a node's plan, or a part
// the plans share.
type pubObject struct {
	compiler.File
	name   string // the ConfigMap's name
	key    string // the data key of the file: publishKey or partKey
	sigKey string // the data key of its signature: publishSigKey or partSigKey
	labels map[string]string
	// refs are the parts the object names: a plan its route table's head
	// and its program's chunks, a head its shards.
	refs []string
}

// phase orders the writes: shards and chunks, then heads, then plans, so
// that an agent never finds an object before what it names.
func (o *pubObject) phase() int {
	switch {
	case o.IsPlan():
		return 2
	case o.Kind == plan.KindRouteTable:
		return 1
	}
	return 0
}

// partLabel is the value of labelPart for a part of kind.
func partLabel(kind string) string { return strings.ToLower(kind) }

// publishObjects makes the ConfigMaps of files (parts and plans, as
// publishFiles returns them; plans are the decoded plans, which name their
// parts) in the order they are written, and checks that each can be one:
// a valid name, at most maxObject bytes, and every part a plan or a head
// names among the parts. All problems are reported at once, before
// anything is sent.
func publishObjects(files []compiler.File, plans []*plan.NodePlan) ([]*pubObject, error) {
	byNode := make(map[string]*plan.NodePlan, len(plans))
	for _, p := range plans {
		byNode[p.Node] = p
	}
	var errs []error
	objs := make([]*pubObject, 0, len(files))
	seen := map[string]bool{}
	for _, f := range files {
		o := &pubObject{File: f}
		if f.IsPlan() {
			o.name, o.key, o.sigKey = configMapName(f.Node), publishKey, publishSigKey
			o.labels = map[string]string{labelManagedBy: "hnsplan"}
			if len(validation.IsValidLabelValue(f.Node)) == 0 {
				o.labels[labelNode] = f.Node
			}
			if seen[o.name] {
				errs = append(errs, fmt.Errorf("node %s has two plans", f.Node))
			}
			if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("node %s: ConfigMap name %q is invalid: %s", f.Node, o.name, strings.Join(msgs, "; ")))
			}
			p := byNode[f.Node]
			if p == nil {
				errs = append(errs, fmt.Errorf("node %s: the plan file has no decoded plan", f.Node))
			} else {
				if p.RouteTable != nil {
					o.refs = append(o.refs, p.RouteTable.Name)
				}
				for _, c := range p.ProgramChunks {
					o.refs = append(o.refs, c.Name)
				}
			}
			if n := o.size(); n > maxObject {
				why := "its own network, host endpoint and pod template"
				if p != nil && len(p.Endpoints) > 0 {
					why = fmt.Sprintf("%d pod endpoints rendered from --inventory, each with its ACLs: compile without --inventory, and the agent renders them from the live pods", len(p.Endpoints))
				}
				errs = append(errs, fmt.Errorf("the plan of node %s is %d bytes (%.1f KiB) with its keys and signature; a published ConfigMap holds at most %d bytes (256 KiB): the plan holds %s",
					f.Node, n, float64(n)/1024, maxObject, why))
			}
		} else {
			o.name, o.key, o.sigKey = f.Part, partKey, partSigKey
			o.labels = map[string]string{labelManagedBy: "hnsplan", labelPart: partLabel(f.Kind)}
			if seen[o.name] {
				errs = append(errs, fmt.Errorf("part %s is there twice", f.Part))
			}
			if err := plan.CheckPartName(f.Part); err != nil {
				errs = append(errs, err)
			}
			switch f.Kind {
			case plan.KindRouteTable:
				if t, err := plan.DecodeRouteTable(f.Data, f.Part); err != nil {
					errs = append(errs, fmt.Errorf("part %s: %w", f.Part, err))
				} else {
					for _, s := range t.Shards {
						o.refs = append(o.refs, s.Name)
					}
				}
			case plan.KindRouteShard, plan.KindProgramChunk:
			default:
				errs = append(errs, fmt.Errorf("part %s: unknown kind %q", f.Part, f.Kind))
			}
			if n := o.size(); n > maxObject {
				errs = append(errs, fmt.Errorf("part %s (%s) is %d bytes (%.1f KiB) with its keys and signature; a published ConfigMap holds at most %d bytes (256 KiB): compile it again with this hnsplan, which splits parts below that",
					f.Part, f.Kind, n, float64(n)/1024, maxObject))
			}
		}
		seen[o.name] = true
		objs = append(objs, o)
	}
	// Every name resolves to a part of the right kind: publish never
	// sends a plan or head whose parts it does not send too.
	kinds := map[string]string{}
	for _, o := range objs {
		if !o.IsPlan() {
			kinds[o.name] = o.Kind
		}
	}
	for _, o := range objs {
		for i, r := range o.refs {
			want := plan.KindRouteShard
			if o.IsPlan() {
				want = plan.KindProgramChunk
				if i == 0 && byNode[o.Node] != nil && byNode[o.Node].RouteTable != nil {
					want = plan.KindRouteTable
				}
			}
			if kinds[r] != want {
				what := "the plan of node " + o.Node
				if !o.IsPlan() {
					what = "route table " + o.Part
				}
				errs = append(errs, fmt.Errorf("%s names part %s (%s), which is not among the parts to publish: compile again", what, r, want))
			}
		}
	}
	slices.SortStableFunc(objs, func(a, b *pubObject) int { return a.phase() - b.phase() })
	return objs, errors.Join(errs...)
}

// size is the size of the object's data: keys, file and signature.
func (o *pubObject) size() int {
	n := len(o.key) + len(o.Data)
	if o.Signature != nil {
		n += len(o.sigKey) + len(o.Signature)
	}
	return n
}

// nodesOf lists the nodes of the plans among objs, in order.
func nodesOf(objs []*pubObject) []string {
	var out []string
	for _, o := range objs {
		if o.IsPlan() {
			out = append(out, o.Node)
		}
	}
	return out
}

// sendSet is the ConfigMaps a publish writes (unless unchanged): the
// picked plans and every part they name, with the shards of the heads
// they name.
func sendSet(objs []*pubObject, picked map[string]bool) map[string]bool {
	byName := map[string]*pubObject{}
	for _, o := range objs {
		byName[o.name] = o
	}
	send := map[string]bool{}
	for _, o := range objs {
		if !o.IsPlan() || !picked[o.Node] {
			continue
		}
		send[o.name] = true
		for _, r := range o.refs {
			send[r] = true
			if head := byName[r]; head != nil {
				for _, s := range head.refs {
					send[s] = true
				}
			}
		}
	}
	return send
}

func dryRunPublish(out io.Writer, objs []*pubObject, prune bool, sel selection) error {
	// Without the cluster every plan may change.
	picked := sel.pick(nodesOf(objs), func(string) bool { return true })
	send := sendSet(objs, picked)
	var plans, parts, sentPlans, sentParts int
	for _, o := range objs {
		if o.IsPlan() {
			plans++
		} else {
			parts++
		}
		if !send[o.name] {
			fmt.Fprintf(out, "configmap %s/%s: held back (%s, %s)\n", publishNamespace, o.name, sel.flag(), o.Digest)
			continue
		}
		if o.IsPlan() {
			sentPlans++
		} else {
			sentParts++
		}
		fmt.Fprintf(out, "configmap %s/%s: would apply (%s, %d bytes%s)\n", publishNamespace, o.name, o.Digest, len(o.Data), signedBy(o.File))
	}
	msg := fmt.Sprintf("dry run: would apply %s and %s to namespace %s; nothing sent", plural(plans, "plan"), plural(parts, "part"), publishNamespace)
	if sel.active() {
		msg = fmt.Sprintf("dry run: would apply %d of %s and %d of %s to namespace %s, holding back %s (%s); nothing sent",
			sentPlans, plural(plans, "plan"), sentParts, plural(parts, "part"), publishNamespace, plural(len(objs)-sentPlans-sentParts, "ConfigMap"), sel.flag())
	}
	if sel.canary > 0 {
		msg += "; --canary picks among the plans that change, which needs the cluster: here the first " + plural(sel.canary, "node") + " by name"
	}
	if prune {
		msg += "; --prune needs the cluster to know what it would delete"
	}
	_, err := fmt.Fprintln(out, msg)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	return nil
}

// publishOptions are publish's choices beside the objects.
type publishOptions struct {
	prune   bool      // delete the plan ConfigMaps of nodes that have no plan
	sel     selection // the nodes to publish to
	workers int       // requests in flight at once; publishWorkers when 0
	// namespace is where the ConfigMaps go: publishNamespace (the agents'
	// contract) when "", another only for tests.
	namespace string
}

// liveConfigMap is what publish keeps of a ConfigMap in the namespace.
type liveConfigMap struct {
	resourceVersion string
	labels          map[string]string
	digest          string // annotationDigest
	data            map[string]string
}

// listConfigMaps reads every ConfigMap of the namespace, a page at a time.
func listConfigMaps(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]*liveConfigMap, error) {
	live := map[string]*liveConfigMap{}
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
	})
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("the list holds a %T", obj)
		}
		live[cm.Name] = &liveConfigMap{resourceVersion: cm.ResourceVersion, labels: cm.Labels, digest: cm.Annotations[annotationDigest], data: cm.Data}
		return nil
	})
	return live, err
}

// stateOf says what applying o does to the ConfigMap live (nil when
// there is none): created, updated, or unchanged when it has o's digest,
// file, signature and labels already, and is not sent.
func stateOf(o *pubObject, live *liveConfigMap) string {
	if live == nil {
		return "created"
	}
	sig, signed := live.data[o.sigKey]
	if live.digest != o.Digest || live.data[o.key] != string(o.Data) || signed != (o.Signature != nil) || sig != string(o.Signature) {
		return "updated"
	}
	for k, v := range o.labels {
		if live.labels[k] != v {
			return "updated"
		}
	}
	return "unchanged"
}

// publish writes objs to the namespace by server-side apply: the parts
// the chosen plans name, then the plans (opts.sel; all without), each only
// when it differs from the cluster's, in phases so that no object is
// written before what it names. Then it prunes (or reports) the plan
// ConfigMaps of nodes that are gone (opts.prune), and deletes the part
// ConfigMaps that no plan ConfigMap names any more.
func publish(ctx context.Context, out, errOut io.Writer, cs kubernetes.Interface, host string, objs []*pubObject, opts publishOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// failed wraps an error; one that is not the API server's answer
	// means it could not be reached.
	failed := func(what string, err error) error {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return &exitError{code: exitInvalid, err: fmt.Errorf("cannot reach the API server %s: %s: %v", host, what, err)}
		}
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s: %v (API server %s)", what, err, host)}
	}
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	ns := cmp.Or(opts.namespace, publishNamespace)
	for _, o := range objs {
		if o.IsPlan() && len(validation.IsValidLabelValue(o.Node)) > 0 {
			fmt.Fprintf(errOut, "hnsplan: node %s: the name is no valid label value; %s omits label %s\n", o.Node, o.name, labelNode)
		}
	}

	// The namespace: created if missing, never changed if present.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		nsac := corev1ac.Namespace(ns).WithLabels(map[string]string{labelManagedBy: "hnsplan"})
		if _, err := cs.CoreV1().Namespaces().Apply(ctx, nsac, apply); err != nil {
			return failed("create namespace "+ns, err)
		}
		fmt.Fprintf(out, "namespace %s: created\n", ns)
	} else if err != nil {
		return failed("get namespace "+ns, err)
	}

	live, err := listConfigMaps(ctx, cs, ns)
	if err != nil {
		return failed("list configmaps in "+ns, err)
	}
	state := make(map[string]string, len(objs))
	byNode := map[string]*pubObject{}
	for _, o := range objs {
		state[o.name] = stateOf(o, live[o.name])
		if o.IsPlan() {
			byNode[o.Node] = o
		}
	}
	picked := opts.sel.pick(nodesOf(objs), func(node string) bool { return state[byNode[node].name] != "unchanged" })
	send := sendSet(objs, picked)

	var plans, parts, sentPlans, sentParts, created, updated, unchanged, heldBack int
	for _, o := range objs {
		if o.IsPlan() {
			plans++
		} else {
			parts++
		}
		if send[o.name] {
			if o.IsPlan() {
				sentPlans++
			} else {
				sentParts++
			}
		}
	}
	// Phase by phase, each on publishWorkers at once; the lines in order.
	workers := opts.workers
	if workers <= 0 {
		workers = publishWorkers
	}
	for lo := 0; lo < len(objs); {
		hi := lo
		for hi < len(objs) && objs[hi].phase() == objs[lo].phase() {
			hi++
		}
		phase := objs[lo:hi]
		lo = hi
		errs := make([]error, len(phase))
		forEach(workers, len(phase), func(i int) error {
			o := phase[i]
			if !send[o.name] || state[o.name] == "unchanged" {
				return nil
			}
			// Server-side apply drops a key this manager no longer sends:
			// an unsigned publish removes an earlier signature.
			data := map[string]string{o.key: string(o.Data)}
			if o.Signature != nil {
				data[o.sigKey] = string(o.Signature)
			}
			cm := corev1ac.ConfigMap(o.name, ns).
				WithLabels(o.labels).
				WithAnnotations(map[string]string{annotationDigest: o.Digest}).
				WithData(data)
			if _, err := cs.CoreV1().ConfigMaps(ns).Apply(ctx, cm, apply); err != nil {
				errs[i] = failed(fmt.Sprintf("apply configmap %s/%s", ns, o.name), err)
				return errs[i]
			}
			return nil
		})
		for i, o := range phase {
			st := state[o.name]
			switch {
			case errs[i] != nil:
				return errs[i]
			case !send[o.name] && st == "unchanged":
				unchanged++
				fmt.Fprintf(out, "configmap %s/%s: unchanged (%s%s)\n", ns, o.name, o.Digest, signedBy(o.File))
			case !send[o.name]:
				// Not sent: the ConfigMap stays as it is.
				heldBack++
				fmt.Fprintf(out, "configmap %s/%s: held back, would be %s (%s, %s%s)\n", ns, o.name, st, opts.sel.flag(), o.Digest, signedBy(o.File))
			default:
				switch st {
				case "created":
					created++
				case "updated":
					updated++
				default:
					unchanged++
				}
				fmt.Fprintf(out, "configmap %s/%s: %s (%s%s)\n", ns, o.name, st, o.Digest, signedBy(o.File))
			}
		}
	}

	// Plan ConfigMaps of nodes that have no plan any more.
	want := map[string]bool{}
	for _, o := range objs {
		want[o.name] = true
	}
	var stale []string
	for name, cm := range live {
		if strings.HasPrefix(name, publishPrefix) && cm.labels[labelManagedBy] == "hnsplan" && !want[name] {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	pruned := 0
	for _, name := range stale {
		if !opts.prune {
			fmt.Fprintf(out, "configmap %s/%s: stale, no plan for node %s (--prune deletes it)\n", ns, name, strings.TrimPrefix(name, publishPrefix))
			continue
		}
		err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return failed(fmt.Sprintf("delete configmap %s/%s", ns, name), err)
		}
		delete(live, name)
		pruned++
		fmt.Fprintf(out, "configmap %s/%s: pruned\n", ns, name)
	}

	// Parts no plan names any more.
	written := map[string]*pubObject{} // what the namespace now holds of objs
	for _, o := range objs {
		if send[o.name] || state[o.name] == "unchanged" {
			written[o.name] = o
		}
	}
	partsPruned, err := pruneParts(ctx, out, errOut, cs, ns, live, written)
	if err != nil {
		return failed("prune parts", err)
	}

	msg := fmt.Sprintf("published %s and %s to %s on %s: %d created, %d updated, %d unchanged",
		plural(plans, "plan"), plural(parts, "part"), ns, host, created, updated, unchanged)
	if opts.sel.active() {
		msg = fmt.Sprintf("published %d of %s and %d of %s to %s on %s (%s): %d created, %d updated, %d unchanged, %d held back",
			sentPlans, plural(plans, "plan"), sentParts, plural(parts, "part"), ns, host, opts.sel.flag(), created, updated, unchanged, heldBack)
	}
	if opts.prune {
		msg += fmt.Sprintf(", %d pruned", pruned)
	} else if len(stale) > 0 {
		msg += fmt.Sprintf(", %d stale", len(stale))
	}
	if partsPruned > 0 {
		msg += fmt.Sprintf(", %s pruned", plural(partsPruned, "part"))
	}
	if _, err := fmt.Fprintln(out, msg); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	return nil
}

// forEach calls f(i) for i in [0, n) on up to workers goroutines; after
// the first error no further call starts (those under way finish).
func forEach(workers, n int, f func(i int) error) {
	var stop atomic.Bool
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if !stop.Load() && f(i) != nil {
					stop.Store(true)
				}
			}
		})
	}
	for i := range n {
		if stop.Load() {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}
