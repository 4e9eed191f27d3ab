// Package fleet is the fleet's side of hnsplan: publishing the compiled
// plans and their parts as ConfigMaps (in waves, to a canary or to chosen
// nodes, pruning on evidence, or as a dry run), following the rollout the
// agents report (status, --wait, --watch), freeing the slots of halted
// nodes (resume), and reading published plans back as an agent reads them
// (hnsplan diff --live). cmd/hnsplan only wires it: flags, output and exit
// codes.
//
// Its functions return plain errors; a command maps them to its exit
// codes. What they print goes to the writers they are given.
package fleet

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

// The ConfigMap contract between `hnsplan publish` and the agent's
// ConfigMap watcher (DESIGN §6). The agent's package applier/planwatch
// defines the same names (ConfigMapNamespace, ConfigMapKey, ConfigMapName);
// they are repeated here, and a test holds the two sides equal. Change
// both or neither.
const (
	Namespace  = "hnsplan-system" // planwatch.ConfigMapNamespace
	PlanKey    = "plan.json"      // planwatch.ConfigMapKey
	PlanPrefix = "plan-"          // planwatch.ConfigMapName(node) = "plan-" + node

	FieldManager   = "hnsplan"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelNode      = "hnsplan.io/node"
	// PlanSigKey holds the plan's detached signature, when it is signed:
	// planwatch.ConfigMapSignatureKey.
	PlanSigKey       = "plan.json.sig"
	AnnotationDigest = "hnsplan.io/digest"

	// A shared part (plan.RouteTable, RouteShard, ProgramChunk) is the
	// ConfigMap named exactly as the part, its file under PartKey (and a
	// signed head's signature under PartSigKey), labelled LabelPart with
	// its kind in lower case (PartLabel).
	PartKey    = "part.json"
	PartSigKey = "part.json.sig"
	LabelPart  = "hnsplan.io/part"

	// MaxObject bounds the data of every ConfigMap publish writes, keys
	// and signature included: a quarter of the API server's 1 MiB, as
	// plan.MaxPartSize bounds every part and plan compile writes, so that
	// each object stays cheap to store and to send to every watcher.
	MaxObject = plan.MaxPartSize

	RequestTimeout = 30 * time.Second // per request
	// DefaultQPS and DefaultBurst are the default client-side rate limit,
	// kubectl's: a publish of 5,000 nodes must not flood the API server.
	DefaultQPS   = 50
	DefaultBurst = 100
	// DefaultWorkers is how many requests publish has in flight at once.
	DefaultWorkers = 8
)

// The Node annotations the agent writes (applier/kube: AnnotationState,
// AnnotationDigest, AnnotationLastError), repeated as the ConfigMap names
// are.
const (
	AnnotationState     = "hnsplan.io/state"
	AnnotationApplied   = "hnsplan.io/applied-digest"
	AnnotationLastError = "hnsplan.io/last-error"
)

// ConfigMapName is the name of node's plan ConfigMap.
func ConfigMapName(node string) string { return PlanPrefix + node }

// Client connects as kubectl does: kubeconfig, else $KUBECONFIG, else
// ~/.kube/config, else in-cluster; context picks a context other than
// the current one. It sends at most qps requests per second: 0 for
// client-go's default, less than 0 for no limit. It returns the server's
// URL for messages.
func Client(kubeconfig, context string, qps float32) (kubernetes.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %v", err)
	}
	cfg.Timeout = RequestTimeout
	if qps != 0 {
		cfg.QPS, cfg.Burst = qps, max(DefaultBurst, int(2*qps)) // client-go: no rate limiter for QPS < 0
	}
	cfg.UserAgent = "hnsplan/" + buildinfo.Get().Version
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, cfg.Host, fmt.Errorf("kubeconfig: %v", err)
	}
	return cs, cfg.Host, nil
}

// APIError wraps err, an API call's, naming the server host: an error
// that is not the API server's answer means it could not be reached.
func APIError(host string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("cannot reach the API server %s: %v", host, err)
	}
	return fmt.Errorf("%v (API server %s)", err, host)
}

// apiError is APIError of the call what.
func apiError(host, what string, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("cannot reach the API server %s: %s: %v", host, what, err)
	}
	return fmt.Errorf("%s: %v (API server %s)", what, err, host)
}

// plural is "1 plan", "2 plans".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
