package planwatch_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func TestConfigMapContract(t *testing.T) {
	// hnsplan publish writes where the agent reads: these are a contract.
	if planwatch.ConfigMapNamespace != "hnsplan-system" || planwatch.ConfigMapKey != "plan.json" || planwatch.ConfigMapName("win-1") != "plan-win-1" {
		t.Errorf("the ConfigMap contract changed: %s/%s key %s",
			planwatch.ConfigMapNamespace, planwatch.ConfigMapName("win-1"), planwatch.ConfigMapKey)
	}
}

// A cmStep changes the cluster and says what the source must deliver.
type cmStep struct {
	name string
	do   func(ctx context.Context, t *testing.T, cms *cmClient)
	want *want // nil: nothing is delivered
}

// cmClient changes the ConfigMaps of a test's node.
type cmClient struct {
	client kubernetes.Interface
	node   string
}

func (c *cmClient) set(ctx context.Context, t *testing.T, node string, data map[string]string, labels map[string]string) {
	t.Helper()
	cms := c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace)
	cm, err := cms.Get(ctx, planwatch.ConfigMapName(node), metav1.GetOptions{})
	if err != nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.ConfigMapName(node), Namespace: planwatch.ConfigMapNamespace, Labels: labels}, Data: data}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	cm.Data, cm.Labels = data, labels
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cmClient) delete(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace).Delete(ctx, planwatch.ConfigMapName(c.node), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cmScenario is the life of one node's ConfigMap, from absent to deleted
// and back. It runs against the fake clientset and, with the integration
// tag, against a real kube-apiserver.
func cmScenario(t *testing.T, node string) []cmStep {
	a, da := encode(t, node, 1)
	b, db := encode(t, node, 2)
	foreign, _ := encode(t, node+"-other", 1)
	edited := bytes.Replace(b, []byte("192.168.2.0/26"), []byte("192.168.3.0/26"), 1)
	hostile := invalid(t, node, func(p *plan.NodePlan) {
		p.Network.Ipams[0].Subnets[0].Policies = []plan.Policy{plan.NewPolicy(plan.VSID{})}
	})
	src := "planwatch: configmap " + planwatch.ConfigMapNamespace + "/" + planwatch.ConfigMapName(node) + ": "
	put := func(data []byte) func(context.Context, *testing.T, *cmClient) {
		return func(ctx context.Context, t *testing.T, c *cmClient) {
			c.set(ctx, t, c.node, map[string]string{planwatch.ConfigMapKey: string(data)}, nil)
		}
	}
	return []cmStep{
		{"absent at start", nil, &want{err: planwatch.ErrAbsent, msg: src + "no plan published: the ConfigMap does not exist: publish the plan with hnsplan publish; waiting for it"}},
		{"created", put(a), &want{digest: da, raw: a}},
		{"updated", put(b), &want{digest: db, raw: b}},
		{"edited", put(edited), &want{err: plan.ErrDigest, msg: src + "digest does not match the content", raw: edited}},
		{"good again", put(b), &want{digest: db}},
		{"verified but invalid", put(hostile), &want{err: plan.ErrInvalid, msg: src + "the plan's content is invalid: network.Ipams[0].Subnets[0].Policies[0].Settings.IsolationId: 0: an Overlay network's VNI must be at least 4096", raw: hostile}},
		{"good after invalid", put(b), &want{digest: db}},
		{"labels only", func(ctx context.Context, t *testing.T, c *cmClient) {
			c.set(ctx, t, c.node, map[string]string{planwatch.ConfigMapKey: string(b)}, map[string]string{"touched": "yes"})
		}, nil},
		{"another node's ConfigMap", func(ctx context.Context, t *testing.T, c *cmClient) {
			c.set(ctx, t, c.node+"-other", map[string]string{planwatch.ConfigMapKey: string(foreign)}, nil)
		}, nil},
		{"foreign plan", put(foreign), &want{err: plan.ErrForeignNode, msg: src + `plan for node "` + node + `-other", this is "` + node + `"`}},
		{"no key", func(ctx context.Context, t *testing.T, c *cmClient) {
			c.set(ctx, t, c.node, map[string]string{"plan.yaml": "x"}, nil)
		}, &want{err: planwatch.ErrNoKey, msg: src + `no plan.json key in data (it has: plan.yaml): publish the plan with hnsplan publish`}},
		{"good after no key", put(a), &want{digest: da}},
		{"deleted", func(ctx context.Context, t *testing.T, c *cmClient) { c.delete(ctx, t) },
			&want{err: planwatch.ErrAbsent, msg: src + "no plan published: the ConfigMap was deleted; the last good plan stays in force"}},
		{"re-created", put(a), &want{digest: da}},
	}
}

// runCMScenario runs cmScenario against a ConfigMap source with resync on
// client. ready, if set, is waited for after the first update and before
// the first change.
func runCMScenario(t *testing.T, client kubernetes.Interface, node string, resync time.Duration, ready <-chan struct{}) {
	// Quiet steps last longer than a resync (client-go's minimum is a
	// second), to check that replaying the cache sends nothing new.
	quiet := 1500 * time.Millisecond
	ch := start(t, &planwatch.ConfigMap{Client: client, Node: node, Resync: resync})
	c := &cmClient{client: client, node: node}
	for i, s := range cmScenario(t, node) {
		t.Logf("step %d: %s", i, s.name)
		if s.do != nil {
			s.do(t.Context(), t, c)
		}
		if s.want == nil {
			expectQuiet(t, ch, quiet)
		} else {
			u := expect(t, ch, *s.want)
			if want := "configmap " + planwatch.ConfigMapNamespace + "/" + planwatch.ConfigMapName(node); u.Source != want {
				t.Errorf("Source = %q, want %q", u.Source, want)
			}
		}
		if i == 0 && ready != nil {
			select {
			case <-ready:
			case <-time.After(wait):
				t.Fatal("the informer did not start watching")
			}
		}
	}
}

func TestConfigMapFake(t *testing.T) {
	client := fake.NewClientset()
	// The fake has no resource versions: a change made between the
	// informer's list and its watch would be lost. Wait for the watch.
	// Two watches: the plan's ConfigMap and the parts'.
	watching := make(chan struct{})
	var watches atomic.Int32
	client.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) {
		if watches.Add(1) == 2 {
			close(watching)
		}
		return false, nil, nil
	})
	// No resync: the fake's watch does not filter by name, so a resync of
	// another node's ConfigMap would wake the source and hide a missing
	// event handler.
	runCMScenario(t, client, "win-1", -1, watching)
}

func TestConfigMapFakeExisting(t *testing.T) {
	// A ConfigMap already there at start, and one of another node's that
	// the fake's watch does not filter out: only ours is read.
	a, da := encode(t, "win-1", 1)
	other, _ := encode(t, "win-2", 1)
	cm := func(node string, data []byte) runtime.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.ConfigMapName(node), Namespace: planwatch.ConfigMapNamespace},
			Data: map[string]string{planwatch.ConfigMapKey: string(data)}}
	}
	client := fake.NewClientset(cm("win-2", other), cm("win-1", a))
	ch := start(t, &planwatch.ConfigMap{Client: client, Node: "win-1", Resync: time.Second})
	expect(t, ch, want{digest: da, raw: a})
	expectQuiet(t, ch, 2500*time.Millisecond) // two resyncs: nothing new
}

func TestConfigMapForbidden(t *testing.T) {
	// An agent without RBAC for its ConfigMap hears why, and recovers
	// once the permission is granted.
	client := fake.NewClientset()
	var forbidden atomic.Bool
	forbidden.Store(true)
	client.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		if forbidden.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "system:node:win-1" cannot list resource "configmaps"`))
		}
		return false, nil, nil
	})
	ch := start(t, &planwatch.ConfigMap{Client: client, Node: "win-1"})
	u := expect(t, ch, want{msg: "planwatch: configmap hnsplan-system/plan-win-1: cannot list the ConfigMap: "})
	if !apierrors.IsForbidden(u.Err) {
		t.Errorf("Err %v: not Forbidden", u.Err)
	}
	if want := "the agent needs get, list and watch on configmaps named plan-win-1 in namespace hnsplan-system"; !strings.Contains(u.Err.Error(), want) {
		t.Errorf("Err %q does not say %q", u.Err, want)
	}
	forbidden.Store(false)
	expect(t, ch, want{err: planwatch.ErrAbsent})
}
