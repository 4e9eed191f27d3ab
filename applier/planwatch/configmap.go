package planwatch

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Where hnsplan publish puts each node's plan and where the agent looks for
// it: the ConfigMap ConfigMapName(node) in ConfigMapNamespace, whose data
// key ConfigMapKey holds the plan file's exact bytes. The two sides share
// these names; changing one is a change of the contract.
const (
	ConfigMapNamespace = "hnsplan-system"
	ConfigMapKey       = "plan.json"
)

// ConfigMapSignatureKey is the data key of the plan's detached signature
// (hnsplan publish --sign-key), named as a signature file is named.
var ConfigMapSignatureKey = plan.SignatureFile(ConfigMapKey)

// A shared part (plan.Parts) is published as the ConfigMap named exactly
// the part's name in ConfigMapNamespace, its file's bytes under data key
// PartConfigMapKey (a route table head's signature under
// PartConfigMapSignatureKey), labelled PartLabel=<kind in lower case>
// (PartLabelValue). The agent lists and watches the ConfigMaps with
// PartLabel, and reads those its plan names.
const (
	PartConfigMapKey = "part.json"
	PartLabel        = "hnsplan.io/part"
)

// PartConfigMapSignatureKey is the data key of a part's detached signature.
var PartConfigMapSignatureKey = plan.SignatureFile(PartConfigMapKey)

// PartLabelValue is the value of PartLabel for a part of kind (a plan.Kind*
// constant): "routetable", "routeshard" or "programchunk".
func PartLabelValue(kind string) string { return strings.ToLower(kind) }

// ConfigMapName returns the name of the ConfigMap that holds node's plan.
func ConfigMapName(node string) string { return "plan-" + node }

// A ConfigMap is a Source that reads the plan from the ConfigMap
// ConfigMapName(Node) in ConfigMapNamespace, through an informer.
//
// The informer lists and watches that one ConfigMap by name (field
// selector metadata.name), so the agent holds no other node's plan and its
// RBAC can be limited to that name: get, list and watch on configmaps with
// resourceNames [plan-<node>] in hnsplan-system.
//
// The parts the plan names are read from a second informer, over the
// ConfigMaps labelled PartLabel in ConfigMapNamespace (a label selector:
// RBAC cannot narrow that list by name, so the agent's Role grants get,
// list and watch on the namespace's configmaps). It stores only their
// name and their PartConfigMapKey and PartConfigMapSignatureKey data.
// The plan is delivered only once every part it names is there at the
// digest (the route table: the key) it names; until then the rejection
// says which part is awaited, and the last good plan stays in force.
//
// A ConfigMap without ConfigMapKey in its data, or whose plan fails
// verification, is a rejection; a ConfigMap that does not exist, or is
// deleted, is ErrAbsent. Either way the last good plan stays in force.
// Until the informer's first list succeeds, each distinct list error
// (most often: no permission) is sent as a rejection.
type ConfigMap struct {
	// Client talks to the cluster.
	Client kubernetes.Interface
	// Node is this node's name: it names the ConfigMap, and a plan for
	// another node is rejected.
	Node string
	// Resync is how often the informer replays its cache, a safety net
	// that sends nothing when nothing changed. Zero means DefaultResync;
	// negative disables it.
	Resync time.Duration
	// Trust, if set, requires the plan to be signed by one of its keys;
	// the signature is read from the data key ConfigMapSignatureKey.
	Trust *Trust
}

var _ Source = (*ConfigMap)(nil)

// Run implements Source.
func (c *ConfigMap) Run(ctx context.Context, updates chan<- Update) error {
	name := ConfigMapName(c.Node)
	key := ConfigMapNamespace + "/" + name
	resync := c.Resync
	switch {
	case resync == 0:
		resync = DefaultResync
	case resync < 0:
		resync = 0
	}
	inf := coreinformers.NewFilteredConfigMapInformer(c.Client, ConfigMapNamespace, resync, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})

	partInf := coreinformers.NewFilteredConfigMapInformer(c.Client, ConfigMapNamespace, resync, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = PartLabel })
	// The store keeps what the agent reads of a part, not the whole
	// object: a cluster's parts are many, their managedFields large.
	if err := partInf.SetTransform(trimPart); err != nil {
		return fmt.Errorf("planwatch: configmap %s: %w", key, err)
	}

	// The handlers only say "look again": Run reads the stores, so it
	// sees the latest state however many events came in between.
	poke := make(chan struct{}, 1)
	kick := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	// planErrs and partErrs carry each informer's latest list or watch
	// error, for the report while the informers have not synced.
	planErrs, partErrs := make(chan error, 1), make(chan error, 1)
	for _, i := range []struct {
		inf  cache.SharedIndexInformer
		errs chan error
	}{{inf, planErrs}, {partInf, partErrs}} {
		if _, err := i.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { kick() },
			UpdateFunc: func(any, any) { kick() },
			DeleteFunc: func(any) { kick() },
		}); err != nil {
			return fmt.Errorf("planwatch: configmap %s: %w", key, err)
		}
		if err := i.inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			cache.DefaultWatchErrorHandler(ctx, r, err) // keep its logging and its quiet on routine expiries
			select {
			case <-i.errs:
			default:
			}
			i.errs <- err
		}); err != nil {
			return fmt.Errorf("planwatch: configmap %s: %w", key, err)
		}
	}
	hasSynced := func() bool { return inf.HasSynced() && partInf.HasSynced() }

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		inf.RunWithContext(ctx)
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		partInf.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-done // Run returns only once the informers have stopped
		<-done
	}()
	synced := make(chan struct{})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), hasSynced) {
			close(synced)
		}
	}()
	parts := storeParts{partInf.GetStore()}

	e := c.emitter(key, updates)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-planErrs:
			if inf.HasSynced() {
				continue // the cache holds the last state seen; the watch resumes by itself
			}
			msg := fmt.Sprintf("cannot list the ConfigMap: %v: the agent needs get, list and watch on configmaps named %s in namespace %s", err, name, ConfigMapNamespace)
			if err := e.reject(ctx, nil, err, msg); err != nil {
				return err
			}
		case err := <-partErrs:
			if partInf.HasSynced() || !inf.HasSynced() {
				// Synced: the watch resumes by itself. The plan's
				// ConfigMap not listed yet: its own error is the one to
				// report first.
				continue
			}
			msg := fmt.Sprintf("cannot list the plans' part ConfigMaps (label %s): %v: the agent needs get, list and watch on configmaps in namespace %s", PartLabel, err, ConfigMapNamespace)
			if err := e.reject(ctx, nil, err, msg); err != nil {
				return err
			}
		case <-synced:
			synced = nil // from now on, the store is the truth
			if err := c.look(ctx, e, inf.GetStore(), key, parts); err != nil {
				return err
			}
		case <-c.Trust.changes():
			if synced != nil {
				continue
			}
			if err := c.look(ctx, e, inf.GetStore(), key, parts); err != nil {
				return err
			}
		case <-poke:
			if synced != nil {
				continue // the first look happens when the cache is complete
			}
			if err := c.look(ctx, e, inf.GetStore(), key, parts); err != nil {
				return err
			}
		}
	}
}

// emitter is the emitter of the ConfigMap key (namespace/name).
func (c *ConfigMap) emitter(key string, updates chan<- Update) *emitter {
	return &emitter{node: c.Node, source: "configmap " + key, what: "the ConfigMap", updates: updates,
		trust: c.Trust, sigName: "its data key " + ConfigMapSignatureKey}
}

// look sends what the store holds for key. Its error is only ever ctx's.
func (c *ConfigMap) look(ctx context.Context, e *emitter, store cache.Store, key string, parts partReader) error {
	obj, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		why := "does not exist: publish the plan with hnsplan publish"
		if e.existed {
			why = "was deleted"
		}
		return e.absent(ctx, why)
	}
	e.existed = true
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return e.absent(ctx, fmt.Sprintf("is a %T in the cache", obj)) // cannot happen with this informer
	}
	data, ok := cm.Data[ConfigMapKey]
	if !ok {
		keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		for k := range cm.BinaryData {
			keys = append(keys, "binaryData."+k)
		}
		slices.Sort(keys)
		msg := fmt.Sprintf("%v in data (it has: %s): publish the plan with hnsplan publish, which writes the plan file's bytes under %q",
			ErrNoKey, orNone(keys), ConfigMapKey)
		return e.reject(ctx, nil, ErrNoKey, msg)
	}
	var sig []byte
	if s, ok := cm.Data[ConfigMapSignatureKey]; ok {
		sig = []byte(s)
	}
	return e.data(ctx, []byte(data), sig, parts)
}

// trimPart is the part informer's transform: of a ConfigMap it keeps the
// name, namespace and resource version (the store's key and the watch's
// resumption) and the part's data keys; labels, annotations, managed
// fields and any other data are dropped before they are stored.
func trimPart(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil // a tombstone: its key is all that is used
	}
	out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, ResourceVersion: cm.ResourceVersion, UID: cm.UID,
	}}
	for _, k := range []string{PartConfigMapKey, PartConfigMapSignatureKey} {
		if v, ok := cm.Data[k]; ok {
			if out.Data == nil {
				out.Data = map[string]string{}
			}
			out.Data[k] = v
		}
	}
	return out, nil
}

// storeParts reads the parts from the part informer's store.
type storeParts struct{ store cache.Store }

func (s storeParts) where(name string) string {
	return fmt.Sprintf("configmap %s/%s, label %s", ConfigMapNamespace, name, PartLabel)
}

func (s storeParts) sigWhere(name string) string {
	return fmt.Sprintf("configmap %s/%s data key %s", ConfigMapNamespace, name, PartConfigMapSignatureKey)
}

// readPart returns the part's bytes; a ConfigMap without the label, or
// without PartConfigMapKey, is not published.
func (s storeParts) readPart(name string) (data, sig []byte, err error) {
	obj, exists, err := s.store.GetByKey(ConfigMapNamespace + "/" + name)
	if err != nil {
		return nil, nil, err
	}
	cm, _ := obj.(*corev1.ConfigMap)
	if !exists || cm == nil {
		return nil, nil, fs.ErrNotExist
	}
	d, ok := cm.Data[PartConfigMapKey]
	if !ok {
		return nil, nil, fmt.Errorf("no data key %s: %w", PartConfigMapKey, fs.ErrNotExist)
	}
	if len(d) > plan.MaxPartSize {
		// Refused before it is copied; the decode would refuse it too.
		return nil, nil, fmt.Errorf("%w: %d bytes, more than a part's %d", plan.ErrTooLarge, len(d), plan.MaxPartSize)
	}
	if s, ok := cm.Data[PartConfigMapSignatureKey]; ok {
		if len(s) > plan.MaxSignatureSize {
			return nil, nil, fmt.Errorf("data key %s is larger than %d bytes: not a signature", PartConfigMapSignatureKey, plan.MaxSignatureSize)
		}
		sig = []byte(s)
	}
	return []byte(d), sig, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no keys"
	}
	return strings.Join(s, ", ")
}
