package control

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Watcher watches the control ConfigMap by name: a list and watch with
// the field selector metadata.name=hnsplan-control, so that the agent
// holds that one object only.
type Watcher struct {
	Client kubernetes.Interface
	// Namespace is the ConfigMap's (default Namespace).
	Namespace string
}

// Run calls fn with the ConfigMap's data at every change (nil once it is
// deleted) until ctx is done. A failed list or watch is retried (with
// client-go's backoff) and calls nothing: what fn last got stands, and
// an agent that never read the ConfigMap is never suspended.
func (w Watcher) Run(ctx context.Context, fn func(data map[string]string)) {
	ns := w.Namespace
	if ns == "" {
		ns = Namespace
	}
	lw := cache.NewListWatchFromClient(w.Client.CoreV1().RESTClient(), "configmaps", ns, fields.OneTermEqualSelector("metadata.name", Name))
	data := func(obj any) map[string]string {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			return maps.Clone(cm.Data)
		}
		return nil
	}
	_, inf := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		ResyncPeriod:  10 * time.Minute,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { fn(data(obj)) },
			UpdateFunc: func(_, obj any) { fn(data(obj)) },
			DeleteFunc: func(any) { fn(nil) },
		},
	})
	inf.RunWithContext(ctx)
}
