package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// refsOf reads the parts a plan or a route table head names from its
// ConfigMap's file: the head and chunks of a plan, the shards of a head.
// A ConfigMap without the key names nothing (an agent finds no plan in
// it); a file that is not such a JSON object is an error: what it names
// is unknown.
func refsOf(data string, ok bool) ([]string, error) {
	if !ok {
		return nil, nil
	}
	var v struct {
		RouteTable *struct {
			Name string `json:"name"`
		} `json:"routeTable"`
		ProgramChunks []struct {
			Name string `json:"name"`
		} `json:"programChunks"`
		Shards []struct {
			Name string `json:"name"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		return nil, err
	}
	var out []string
	if v.RouteTable != nil {
		out = append(out, v.RouteTable.Name)
	}
	for _, c := range v.ProgramChunks {
		out = append(out, c.Name)
	}
	for _, s := range v.Shards {
		out = append(out, s.Name)
	}
	return out, nil
}

// pruneParts deletes the part ConfigMaps hnsplan wrote (labelled
// LabelManagedBy=hnsplan and LabelPart, named as compile names parts)
// that nothing left in the namespace names: no plan ConfigMap (plan-*,
// whoever wrote it: an agent reads any), nor the head such a plan names.
// live is the namespace as listed before the writes, less the pruned
// plans; written are the objects the namespace now holds as publish
// sent (or found) them. What a ConfigMap names is read from its file; if
// one cannot be read, what it names is unknown and no part is deleted:
// deleting takes positive evidence. Each deletion is conditional on the
// ConfigMap being as it was listed (a concurrent publish may have written
// it again). Heads go first, so that no head is left naming a deleted
// shard.
func pruneParts(ctx context.Context, out, errOut io.Writer, cs kubernetes.Interface, ns string, live map[string]*liveConfigMap, written map[string]*Object) (int, error) {
	keep, ok := keptParts(errOut, ns, live, written)
	if !ok {
		return 0, nil
	}
	var gone []string
	for name, cm := range live {
		if written[name] == nil && !keep[name] && cm.labels[LabelManagedBy] == "hnsplan" && cm.labels[LabelPart] != "" && plan.CheckPartName(name) == nil {
			gone = append(gone, name)
		}
	}
	isHead := func(name string) bool { return live[name].labels[LabelPart] == PartLabel(plan.KindRouteTable) }
	slices.SortFunc(gone, func(a, b string) int {
		if ha, hb := isHead(a), isHead(b); ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	n := 0
	for _, name := range gone {
		rv := live[name].resourceVersion
		err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case apierrors.IsConflict(err):
			fmt.Fprintf(out, "configmap %s/%s: kept, it changed since publish read it\n", ns, name)
			continue
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return n, fmt.Errorf("delete configmap %s/%s: %w", ns, name, err)
		}
		n++
		fmt.Fprintf(out, "configmap %s/%s: pruned, no plan names it\n", ns, name)
	}
	return n, nil
}

// keptParts is the parts that something left in the namespace names
// (pruneParts' live and written): the parts each plan ConfigMap names,
// and the shards of the heads among them. false when what one names
// cannot be read, which errOut is told: then no part may be deleted.
func keptParts(errOut io.Writer, ns string, live map[string]*liveConfigMap, written map[string]*Object) (map[string]bool, bool) {
	refs := func(name, key string) ([]string, error) {
		if o := written[name]; o != nil {
			return o.refs, nil
		}
		cm := live[name]
		if cm == nil {
			return nil, nil
		}
		data, ok := cm.data[key]
		return refsOf(data, ok)
	}
	names := keysOf(live)
	for name := range written {
		names[name] = true
	}
	var planNames []string
	for name := range names {
		if strings.HasPrefix(name, PlanPrefix) {
			planNames = append(planNames, name)
		}
	}
	slices.Sort(planNames)
	keep := map[string]bool{}
	var heads []string
	for _, name := range planNames {
		rs, err := refs(name, PlanKey)
		if err != nil {
			fmt.Fprintf(errOut, "hnsplan: no part pruned: configmap %s/%s holds no plan hnsplan can read (%v), so which parts it names is unknown; publish its node's plan, or delete it\n", ns, name, err)
			return nil, false
		}
		for _, r := range rs {
			if !keep[r] {
				keep[r] = true
				heads = append(heads, r)
			}
		}
	}
	for _, name := range heads {
		isHead := written[name] != nil && written[name].Kind == plan.KindRouteTable
		if cm := live[name]; written[name] == nil && cm != nil {
			isHead = cm.labels[LabelPart] == PartLabel(plan.KindRouteTable)
		}
		if !isHead {
			continue
		}
		rs, err := refs(name, PartKey)
		if err != nil {
			fmt.Fprintf(errOut, "hnsplan: no part pruned: configmap %s/%s holds no route table hnsplan can read (%v), so which shards it names is unknown; publish again, or delete it\n", ns, name, err)
			return nil, false
		}
		for _, r := range rs {
			keep[r] = true
		}
	}
	return keep, true
}

// keysOf is the set of m's keys.
func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}
