package fleet

import (
	"cmp"
	"context"
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
)

// DryRun prints what a publish of objs would apply, without the cluster:
// every plan may change, so --canary takes the first nodes by name, and
// what --prune would delete is unknown.
func DryRun(out io.Writer, objs []*Object, prune bool, sel Selection) error {
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
			fmt.Fprintf(out, "configmap %s/%s: held back (%s, %s)\n", Namespace, o.name, sel.Flag(), o.Digest)
			continue
		}
		if o.IsPlan() {
			sentPlans++
		} else {
			sentParts++
		}
		fmt.Fprintf(out, "configmap %s/%s: would apply (%s, %d bytes%s)\n", Namespace, o.name, o.Digest, len(o.Data), SignedBy(o.File))
	}
	msg := fmt.Sprintf("dry run: would apply %s and %s to namespace %s; nothing sent", plural(plans, "plan"), plural(parts, "part"), Namespace)
	if sel.Active() {
		msg = fmt.Sprintf("dry run: would apply %d of %s and %d of %s to namespace %s, holding back %s (%s); nothing sent",
			sentPlans, plural(plans, "plan"), sentParts, plural(parts, "part"), Namespace, plural(len(objs)-sentPlans-sentParts, "ConfigMap"), sel.Flag())
	}
	if sel.Canary > 0 {
		msg += "; --canary picks among the plans that change, which needs the cluster: here the first " + plural(sel.Canary, "node") + " by name"
	}
	if prune {
		msg += "; --prune needs the cluster to know what it would delete"
	}
	_, err := fmt.Fprintln(out, msg)
	return err
}

// Options are Publish's choices beside the objects.
type Options struct {
	Prune   bool      // delete the plan ConfigMaps of nodes that have no plan
	Sel     Selection // the nodes to publish to
	Workers int       // requests in flight at once; DefaultWorkers when 0
	// Namespace is where the ConfigMaps go: Namespace (the agents'
	// contract) when "", another only for tests.
	Namespace string
	// Host names the API server in messages.
	Host string
	// Out gets a line per ConfigMap and the summary; ErrOut the warnings.
	// io.Discard when nil.
	Out, ErrOut io.Writer
}

// liveConfigMap is what publish keeps of a ConfigMap in the namespace.
type liveConfigMap struct {
	resourceVersion string
	labels          map[string]string
	digest          string // AnnotationDigest
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
		live[cm.Name] = &liveConfigMap{resourceVersion: cm.ResourceVersion, labels: cm.Labels, digest: cm.Annotations[AnnotationDigest], data: cm.Data}
		return nil
	})
	return live, err
}

// stateOf says what applying o does to the ConfigMap live (nil when
// there is none): created, updated, or unchanged when it has o's digest,
// file, signature and labels already, and is not sent.
func stateOf(o *Object, live *liveConfigMap) string {
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

// publishing is one run of Publish.
type publishing struct {
	ctx         context.Context
	cs          kubernetes.Interface
	opts        Options
	ns          string
	objs        []*Object
	out, errOut io.Writer
	apply       metav1.ApplyOptions

	live  map[string]*liveConfigMap // the namespace as listed first
	state map[string]string         // stateOf each object
	send  map[string]bool           // the objects to send

	created, updated, unchanged, heldBack int
}

// failed wraps an error of the call what.
func (p *publishing) failed(what string, err error) error { return apiError(p.opts.Host, what, err) }

// Publish writes objs to the namespace by server-side apply: the parts
// the chosen plans name, then the plans (opts.Sel; all without), each only
// when it differs from the cluster's, in phases so that no object is
// written before what it names. Then it prunes (or reports) the plan
// ConfigMaps of nodes that are gone (opts.Prune), and deletes the part
// ConfigMaps that no plan ConfigMap names any more.
func Publish(ctx context.Context, cs kubernetes.Interface, objs []*Object, opts Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	p := &publishing{ctx: ctx, cs: cs, opts: opts, ns: cmp.Or(opts.Namespace, Namespace), objs: objs,
		out: cmp.Or[io.Writer](opts.Out, io.Discard), errOut: cmp.Or[io.Writer](opts.ErrOut, io.Discard),
		apply: metav1.ApplyOptions{FieldManager: FieldManager, Force: true}}
	for _, o := range objs {
		if o.IsPlan() && len(validation.IsValidLabelValue(o.Node)) > 0 {
			fmt.Fprintf(p.errOut, "hnsplan: node %s: the name is no valid label value; %s omits label %s\n", o.Node, o.name, LabelNode)
		}
	}
	if err := p.namespace(); err != nil {
		return err
	}
	if err := p.read(); err != nil {
		return err
	}
	if err := p.write(); err != nil {
		return err
	}
	stale, pruned, err := p.pruneStale()
	if err != nil {
		return err
	}
	// Parts no plan names any more.
	written := map[string]*Object{} // what the namespace now holds of objs
	for _, o := range objs {
		if p.send[o.name] || p.state[o.name] == "unchanged" {
			written[o.name] = o
		}
	}
	partsPruned, err := pruneParts(ctx, p.out, p.errOut, cs, p.ns, p.live, written)
	if err != nil {
		return p.failed("prune parts", err)
	}
	_, err = fmt.Fprintln(p.out, p.summary(len(stale), pruned, partsPruned))
	return err
}

// namespace creates the namespace if it is missing, and never changes it
// if it is there.
func (p *publishing) namespace() error {
	_, err := p.cs.CoreV1().Namespaces().Get(p.ctx, p.ns, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return p.failed("get namespace "+p.ns, err)
	}
	nsac := corev1ac.Namespace(p.ns).WithLabels(map[string]string{LabelManagedBy: "hnsplan"})
	if _, err := p.cs.CoreV1().Namespaces().Apply(p.ctx, nsac, p.apply); err != nil {
		return p.failed("create namespace "+p.ns, err)
	}
	fmt.Fprintf(p.out, "namespace %s: created\n", p.ns)
	return nil
}

// read lists the namespace and decides what each object's apply does
// and which are sent.
func (p *publishing) read() error {
	live, err := listConfigMaps(p.ctx, p.cs, p.ns)
	if err != nil {
		return p.failed("list configmaps in "+p.ns, err)
	}
	p.live = live
	p.state = make(map[string]string, len(p.objs))
	byNode := map[string]*Object{}
	for _, o := range p.objs {
		p.state[o.name] = stateOf(o, live[o.name])
		if o.IsPlan() {
			byNode[o.Node] = o
		}
	}
	picked := p.opts.Sel.pick(nodesOf(p.objs), func(node string) bool { return p.state[byNode[node].name] != "unchanged" })
	p.send = sendSet(p.objs, picked)
	return nil
}

// write applies the objects to send phase by phase, each phase on
// opts.Workers at once, and prints a line per object, in order.
func (p *publishing) write() error {
	workers := p.opts.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	objs := p.objs
	for lo := 0; lo < len(objs); {
		hi := lo
		for hi < len(objs) && objs[hi].phase() == objs[lo].phase() {
			hi++
		}
		phase := objs[lo:hi]
		lo = hi
		errs := make([]error, len(phase))
		forEach(workers, len(phase), func(i int) error {
			errs[i] = p.applyOne(phase[i])
			return errs[i]
		})
		for i, o := range phase {
			if errs[i] != nil {
				return errs[i]
			}
			p.report(o)
		}
	}
	return nil
}

// applyOne applies o if it is to be sent and differs from the cluster's.
func (p *publishing) applyOne(o *Object) error {
	if !p.send[o.name] || p.state[o.name] == "unchanged" {
		return nil
	}
	// Server-side apply drops a key this manager no longer sends: an
	// unsigned publish removes an earlier signature.
	data := map[string]string{o.key: string(o.Data)}
	if o.Signature != nil {
		data[o.sigKey] = string(o.Signature)
	}
	cm := corev1ac.ConfigMap(o.name, p.ns).
		WithLabels(o.labels).
		WithAnnotations(map[string]string{AnnotationDigest: o.Digest}).
		WithData(data)
	if _, err := p.cs.CoreV1().ConfigMaps(p.ns).Apply(p.ctx, cm, p.apply); err != nil {
		return p.failed(fmt.Sprintf("apply configmap %s/%s", p.ns, o.name), err)
	}
	return nil
}

// report prints o's line and counts it.
func (p *publishing) report(o *Object) {
	st := p.state[o.name]
	switch {
	case !p.send[o.name] && st == "unchanged":
		p.unchanged++
		fmt.Fprintf(p.out, "configmap %s/%s: unchanged (%s%s)\n", p.ns, o.name, o.Digest, SignedBy(o.File))
	case !p.send[o.name]:
		// Not sent: the ConfigMap stays as it is.
		p.heldBack++
		fmt.Fprintf(p.out, "configmap %s/%s: held back, would be %s (%s, %s%s)\n", p.ns, o.name, st, p.opts.Sel.Flag(), o.Digest, SignedBy(o.File))
	default:
		switch st {
		case "created":
			p.created++
		case "updated":
			p.updated++
		default:
			p.unchanged++
		}
		fmt.Fprintf(p.out, "configmap %s/%s: %s (%s%s)\n", p.ns, o.name, st, o.Digest, SignedBy(o.File))
	}
}

// pruneStale deletes (with opts.Prune) or reports the plan ConfigMaps
// hnsplan wrote of nodes that have no plan any more. It returns them and
// how many it deleted.
func (p *publishing) pruneStale() (stale []string, pruned int, err error) {
	want := map[string]bool{}
	for _, o := range p.objs {
		want[o.name] = true
	}
	for name, cm := range p.live {
		if strings.HasPrefix(name, PlanPrefix) && cm.labels[LabelManagedBy] == "hnsplan" && !want[name] {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		if !p.opts.Prune {
			fmt.Fprintf(p.out, "configmap %s/%s: stale, no plan for node %s (--prune deletes it)\n", p.ns, name, strings.TrimPrefix(name, PlanPrefix))
			continue
		}
		err := p.cs.CoreV1().ConfigMaps(p.ns).Delete(p.ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return stale, pruned, p.failed(fmt.Sprintf("delete configmap %s/%s", p.ns, name), err)
		}
		delete(p.live, name)
		pruned++
		fmt.Fprintf(p.out, "configmap %s/%s: pruned\n", p.ns, name)
	}
	return stale, pruned, nil
}

// summary is publish's last line.
func (p *publishing) summary(stale, pruned, partsPruned int) string {
	var plans, parts, sentPlans, sentParts int
	for _, o := range p.objs {
		sent := 0
		if p.send[o.name] {
			sent = 1
		}
		if o.IsPlan() {
			plans, sentPlans = plans+1, sentPlans+sent
		} else {
			parts, sentParts = parts+1, sentParts+sent
		}
	}
	msg := fmt.Sprintf("published %s and %s to %s on %s: %d created, %d updated, %d unchanged",
		plural(plans, "plan"), plural(parts, "part"), p.ns, p.opts.Host, p.created, p.updated, p.unchanged)
	if p.opts.Sel.Active() {
		msg = fmt.Sprintf("published %d of %s and %d of %s to %s on %s (%s): %d created, %d updated, %d unchanged, %d held back",
			sentPlans, plural(plans, "plan"), sentParts, plural(parts, "part"), p.ns, p.opts.Host, p.opts.Sel.Flag(), p.created, p.updated, p.unchanged, p.heldBack)
		if p.heldBack > 0 {
			// The route table records the new plans (plan.VersionError).
			msg += " (the nodes held back keep their last good plan and route table until their own plans are published)"
		}
	}
	if p.opts.Prune {
		msg += fmt.Sprintf(", %d pruned", pruned)
	} else if stale > 0 {
		msg += fmt.Sprintf(", %d stale", stale)
	}
	if partsPruned > 0 {
		msg += fmt.Sprintf(", %s pruned", plural(partsPruned, "part"))
	}
	return msg
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
