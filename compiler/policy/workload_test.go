package policy_test

// The renderer's benchmarks and savings tests run on workloads of
// internal/synth/workload; these are the names they use for them.

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/acl"
	"github.com/hnsplan/hnsplan/compiler/diag"
	"github.com/hnsplan/hnsplan/compiler/intent"
	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/compiler/policy"
	synthload "github.com/hnsplan/hnsplan/internal/synth/workload"
)

type workloadConfig = synthload.Config

// bigWorkload is the benchmark's cluster: 2,000 policies over 30,000 pods
// in 300 namespaces, 110 pods a node; smallWorkload is the savings tests'
// 1,000 endpoints.
var bigWorkload, smallWorkload = synthload.Big, synthload.Small

const tcp, udp = 6, 17

// workload is a generated workload (g) under the names the tests use;
// its slices and maps are g's.
type workload struct {
	g          *synthload.Workload
	pods       []*acl.Pod
	namespaces map[string]map[string]string
	manifests  intent.Manifests
	// node holds the pods of one node (the first podsPerNode of the
	// shuffled inventory), in pod order.
	node      []*acl.Pod
	hostAddrs []netip.Addr
}

// generateWorkload builds the workload cfg describes; the same cfg gives
// the same workload.
func generateWorkload(cfg workloadConfig) *workload {
	g := synthload.Generate(cfg)
	return &workload{g: g, pods: g.Pods, namespaces: g.Namespaces, manifests: g.Manifests, node: g.Node, hostAddrs: g.HostAddrs}
}

func ptr[T any](v T) *T { return &v }

// compileOK compiles m and fails on an error finding.
func compileOK(tb testing.TB, m *intent.Manifests) *plan.Program {
	tb.Helper()
	prog, findings := policy.Compile(m, nil, func(string) diag.Severity { return diag.Info })
	for _, f := range findings {
		if f.Severity == diag.Error {
			tb.Fatalf("compile: %s", f)
		}
	}
	return prog
}

// calicoFromYAML reads one projectcalico.org/v3 NetworkPolicy or
// GlobalNetworkPolicy written in YAML.
func calicoFromYAML(tb testing.TB, doc string) intent.CalicoPolicy {
	tb.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		tb.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var cp intent.CalicoPolicy
	dec := json.NewDecoder(strings.NewReader(string(j)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		tb.Fatal(err)
	}
	cp.Global = cp.Kind == "GlobalNetworkPolicy"
	return cp
}
