package planwatch

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/sshkey"
)

// Where the agent reads its trusted keys with --trusted-keys-configmap:
// the ConfigMap TrustedKeysName in ConfigMapNamespace, data key
// TrustedKeysKey, in authorized_keys form (one OpenSSH ed25519 public
// key a line, # comments).
//
// Whoever can write this ConfigMap decides which plans the agent applies:
// it is a convenience for rotating keys from the cluster, and as strong as
// the RBAC on it. A trusted-keys file on the node is stronger.
const (
	TrustedKeysName = "trusted-keys"
	TrustedKeysKey  = "authorized_keys"
)

// TrustedKeys watches the trusted-keys ConfigMap and keeps Trust set to
// the keys it holds. A ConfigMap that is missing, lacks TrustedKeysKey,
// lists no key or has a line that is not an ed25519 public key leaves the
// Trust with no key, so every plan is refused (failing closed) until it is
// fixed; so does a list error before the first sync.
type TrustedKeys struct {
	Client kubernetes.Interface
	Trust  *Trust
	// OnChange, if set, is called with each new set of keys, or why there
	// is none, for the agent's log.
	OnChange func(ring plan.Keyring, why error)
	// Resync as in ConfigMap; zero means DefaultResync.
	Resync time.Duration
}

// KeysOf reads the keys of the trusted-keys ConfigMap cm as the agent
// does, or says why it has none: no TrustedKeysKey, no key listed, or a
// line that is not an ed25519 public key. A nil cm is missing.
func KeysOf(cm *corev1.ConfigMap) (plan.Keyring, error) {
	source := (&TrustedKeys{}).Source()
	if cm == nil {
		return nil, fmt.Errorf("%s does not exist", source)
	}
	text, ok := cm.Data[TrustedKeysKey]
	if !ok {
		return nil, fmt.Errorf("%s: the ConfigMap has no key %s", source, TrustedKeysKey)
	}
	ring, err := sshkey.ParseAuthorizedKeys([]byte(text), source)
	if err == nil && len(ring) == 0 {
		err = fmt.Errorf("%s lists no key", source)
	}
	return ring, err
}

// Source names the ConfigMap and its key, for messages.
func (k *TrustedKeys) Source() string {
	return "configmap " + ConfigMapNamespace + "/" + TrustedKeysName + " key " + TrustedKeysKey
}

// Run watches until ctx ends and returns ctx.Err().
func (k *TrustedKeys) Run(ctx context.Context) error {
	resync := k.Resync
	if resync == 0 {
		resync = DefaultResync
	}
	if resync < 0 {
		resync = 0
	}
	set := func(ring plan.Keyring, why error) {
		k.Trust.Set(ring, why)
		if k.OnChange != nil {
			k.OnChange(ring, why)
		}
	}
	source := k.Source()
	update := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != TrustedKeysName {
			return // a watch that does not filter by name (a fake) sends others
		}
		set(KeysOf(cm))
	}
	inf := coreinformers.NewFilteredConfigMapInformer(k.Client, ConfigMapNamespace, resync, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", TrustedKeysName).String()
		})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); !ok || cm.Name == TrustedKeysName {
				set(nil, fmt.Errorf("%s was deleted", source))
			}
		},
	}); err != nil {
		return fmt.Errorf("planwatch: %s: %w", source, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if !inf.HasSynced() {
			set(nil, fmt.Errorf("cannot list %s: %v: the agent needs get, list and watch on configmaps named %s in namespace %s", source, err, TrustedKeysName, ConfigMapNamespace))
		}
	}); err != nil {
		return fmt.Errorf("planwatch: %s: %w", source, err)
	}
	go func() {
		// An empty namespace syncs with no Add: the ConfigMap is missing.
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			if _, exists, _ := inf.GetStore().GetByKey(ConfigMapNamespace + "/" + TrustedKeysName); !exists {
				set(nil, fmt.Errorf("%s does not exist: create it with the public keys plans are signed with", source))
			}
		}
	}()
	inf.RunWithContext(ctx)
	return ctx.Err()
}
