package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// ReadOptions say how ReadLive verifies the published plans: as an agent
// with Trust does (nil: an agent given no trusted keys, which checks no
// signature), or, with ClusterTrust, as an agent given
// --trusted-keys-configmap does, with the keys of the trusted-keys
// ConfigMap (planwatch.KeysOf: none, and every plan is refused, when it
// is missing or wrong).
type ReadOptions struct {
	Trust        *planwatch.Trust
	ClusterTrust bool
	Host         string // the API server, for messages
}

// Live is what the cluster publishes to the agents, read back.
type Live struct {
	// Plans are the published plans an agent accepts, assembled with
	// their parts, by node.
	Plans []*plan.NodePlan
	// Refused says, for each plan ConfigMap an agent would refuse, why,
	// naming it; in the order of the nodes.
	Refused []error
}

// ReadLive reads every plan ConfigMap (plan-<node>, whoever wrote it: an
// agent reads any) and the parts of the agents' namespace, and verifies
// each plan as the agent on its node does, with the agent's own code
// (planwatch.Published): signature, format, node, digest, the parts at
// the digests the plan names, and the plan's meaning. Its error is the
// API's.
func ReadLive(ctx context.Context, cs kubernetes.Interface, opts ReadOptions) (*Live, error) {
	cms, err := listObjects(ctx, cs, Namespace)
	if err != nil {
		return nil, apiError(opts.Host, "list configmaps in "+Namespace, err)
	}
	trust := opts.Trust
	if opts.ClusterTrust {
		var tk *corev1.ConfigMap
		for _, cm := range cms {
			if cm.Name == planwatch.TrustedKeysName {
				tk = cm
			}
		}
		trust = planwatch.NewTrust(nil)
		trust.Set(planwatch.KeysOf(tk))
	}
	pub, err := planwatch.NewPublished(cms)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, cm := range cms {
		if node, ok := strings.CutPrefix(cm.Name, PlanPrefix); ok && node != "" {
			nodes = append(nodes, node)
		}
	}
	slices.Sort(nodes)
	live := &Live{}
	for _, node := range nodes {
		u := pub.Read(ctx, node, trust)
		if u.Err != nil {
			live.Refused = append(live.Refused, fmt.Errorf("node %s: the agent would refuse the published plan: %w", node, u.Err))
			continue
		}
		live.Plans = append(live.Plans, u.Plan)
	}
	return live, nil
}

// Err is the refusals as one error, nil without any.
func (l *Live) Err() error { return errors.Join(l.Refused...) }

// listObjects reads every ConfigMap of the namespace, a page at a time.
func listObjects(ctx context.Context, cs kubernetes.Interface, ns string) ([]*corev1.ConfigMap, error) {
	var out []*corev1.ConfigMap
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
	})
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("the list holds a %T", obj)
		}
		out = append(out, cm)
		return nil
	})
	return out, err
}
