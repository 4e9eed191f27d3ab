package planwatch

import (
	"context"
	"fmt"
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

	// The handlers only say "look again": Run reads the store, so it sees
	// the latest state however many events came in between.
	poke := make(chan struct{}, 1)
	kick := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return fmt.Errorf("planwatch: configmap %s: %w", key, err)
	}
	// listErrs carries the latest list or watch error, for the report
	// while the informer has not synced.
	listErrs := make(chan error, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err) // keep its logging and its quiet on routine expiries
		select {
		case <-listErrs:
		default:
		}
		listErrs <- err
	}); err != nil {
		return fmt.Errorf("planwatch: configmap %s: %w", key, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-done // Run returns only once the informer has stopped
	}()
	synced := make(chan struct{})
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			close(synced)
		}
	}()

	e := &emitter{node: c.Node, source: "configmap " + key, what: "the ConfigMap", updates: updates,
		trust: c.Trust, sigName: "its data key " + ConfigMapSignatureKey}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-listErrs:
			if inf.HasSynced() {
				continue // the cache holds the last state seen; the watch resumes by itself
			}
			msg := fmt.Sprintf("cannot list the ConfigMap: %v: the agent needs get, list and watch on configmaps named %s in namespace %s", err, name, ConfigMapNamespace)
			if err := e.reject(ctx, nil, err, msg); err != nil {
				return err
			}
		case <-synced:
			synced = nil // from now on, the store is the truth
			if err := c.look(ctx, e, inf.GetStore(), key); err != nil {
				return err
			}
		case <-c.Trust.changes():
			if synced != nil {
				continue
			}
			if err := c.look(ctx, e, inf.GetStore(), key); err != nil {
				return err
			}
		case <-poke:
			if synced != nil {
				continue // the first look happens when the cache is complete
			}
			if err := c.look(ctx, e, inf.GetStore(), key); err != nil {
				return err
			}
		}
	}
}

// look sends what the store holds for key. Its error is only ever ctx's.
func (c *ConfigMap) look(ctx context.Context, e *emitter, store cache.Store, key string) error {
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
	return e.data(ctx, []byte(data), sig)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no keys"
	}
	return strings.Join(s, ", ")
}
