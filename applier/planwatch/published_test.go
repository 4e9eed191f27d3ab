package planwatch_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier/planwatch"
)

// TestPublishedReadsAsTheSource: Published.Read delivers what a ConfigMap
// source delivers at each step of the ConfigMap's life (cmScenario), read
// once from a listing: the same plan, or the same refusal. A one-shot
// reader remembers nothing, so an absence reads as "does not exist" and
// no last good plan is in force.
func TestPublishedReadsAsTheSource(t *testing.T) {
	ctx := context.Background()
	const node = "win-pub"
	c := &cmClient{client: fake.NewClientset(), node: node}
	for _, step := range cmScenario(t, node) {
		if step.do != nil {
			step.do(ctx, t, c)
		}
		if step.want == nil {
			continue
		}
		w := *step.want
		if w.err == planwatch.ErrAbsent {
			w.msg = "no plan published: the ConfigMap does not exist: publish the plan with hnsplan publish; waiting for it"
		}
		list, err := c.client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cms []*corev1.ConfigMap
		for i := range list.Items {
			cms = append(cms, &list.Items[i])
		}
		pub, err := planwatch.NewPublished(cms)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan planwatch.Update, 1)
		ch <- pub.Read(ctx, node, nil)
		t.Run(strings.ReplaceAll(step.name, " ", "_"), func(t *testing.T) { expect(t, ch, w) })
	}
}
