package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
)

var metav1PatchOptions = metav1.PatchOptions{FieldManager: Component}

// mirrorAnnotation marks a static pod's mirror in the API; evicting it does
// nothing (the kubelet recreates it from its manifest).
const mirrorAnnotation = corev1.MirrorPodAnnotationKey

// Cordon marks this node unschedulable and records, with the
// hnsplan.io/cordoned-by-agent annotation, that the agent did so. A node that
// is already unschedulable is left as it is, without the marker: that cordon
// belongs to whoever made it, and Uncordon will not lift it. Cordon is
// idempotent.
//
// The patch carries the resourceVersion read, so an operator's concurrent
// cordon or uncordon makes it fail with a conflict and start over rather
// than be overwritten.
func (c *Client) Cordon(ctx context.Context) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			_, ours := n.Annotations[AnnotationCordoned]
			_, letGo := n.Annotations[AnnotationLetGo]
			if !ours || !letGo {
				return nil
			}
			// Still the agent's cordon, let go of by an operator (rollout
			// resume) and taken up again (replace --retry): the node is
			// the agent's to finish once more, so if the agent dies it
			// counts against maxUnavailable (Stranded).
			return c.patchNode(ctx, map[string]any{
				"metadata": map[string]any{
					"resourceVersion": n.ResourceVersion,
					"annotations":     map[string]any{AnnotationLetGo: nil},
				},
			})
		}
		return c.patchNode(ctx, map[string]any{
			"metadata": map[string]any{
				"resourceVersion": n.ResourceVersion,
				"annotations":     map[string]any{AnnotationCordoned: "true", AnnotationLetGo: nil},
			},
			"spec": map[string]any{"unschedulable": true},
		})
	})
	if err != nil {
		return fmt.Errorf("kube: cordon node %q: %w", c.node, err)
	}
	return nil
}

// Uncordon lifts a cordon made by Cordon, possibly by an earlier run of the
// agent, and removes the marker. It does nothing on a node the agent did not
// cordon. If an operator cordons a node the agent has already cordoned, the
// two cannot be told apart and Uncordon lifts it.
func (c *Client) Uncordon(ctx context.Context) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ours := n.Annotations[AnnotationCordoned]; !ours {
			return nil
		}
		return c.patchNode(ctx, map[string]any{
			"metadata": map[string]any{
				"resourceVersion": n.ResourceVersion,
				"annotations":     map[string]any{AnnotationCordoned: nil, AnnotationLetGo: nil},
			},
			"spec": map[string]any{"unschedulable": nil},
		})
	})
	if err != nil {
		return fmt.Errorf("kube: uncordon node %q: %w", c.node, err)
	}
	return nil
}

// Evict asks the Eviction API (policy/v1) to evict every pod on this node
// that holds an HNS endpoint the agent must see gone before it deletes the
// network, and returns those still present, as sorted "namespace/name".
//
// Skipped, and never pending: DaemonSet pods (their controller would put them
// straight back, and ignores cordons), mirror pods of static pods, and
// HostNetwork pods (no HNS endpoint). Pending: pods whose eviction a
// PodDisruptionBudget refuses (HTTP 429, which is not an error: the caller
// retries, and reports "blocked" if it lasts), pods evicted but still
// terminating (the kubelet has not yet stopped them), and pods whose
// eviction failed otherwise (their errors are joined into err). Evict is
// meant to be called repeatedly until pending is empty; it reads the pods
// from the API server, not the cache, so it never acts on stale data, and
// it does not evict a pod again while it is terminating.
func (c *Client) Evict(ctx context.Context) (pending []string, err error) {
	list, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", c.node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("kube: evict pods of node %q: list pods: %w", c.node, err)
	}
	var errs []error
	for i := range list.Items {
		p := &list.Items[i]
		if skipEviction(p) {
			continue
		}
		key := p.Namespace + "/" + p.Name
		if p.DeletionTimestamp != nil {
			pending = append(pending, key)
			continue
		}
		gone, err := c.evict(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("kube: evict pod %s from node %q: %w", key, c.node, err))
		}
		if !gone {
			pending = append(pending, key)
		}
	}
	slices.Sort(pending)
	return pending, errors.Join(errs...)
}

// evict evicts p and reports whether it is gone. A PodDisruptionBudget's
// refusal returns (false, nil).
func (c *Client) evict(ctx context.Context, p *corev1.Pod) (gone bool, err error) {
	uid := p.UID
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		// The UID precondition keeps a same-named successor (a StatefulSet
		// pod recreated meanwhile, maybe elsewhere) from being evicted.
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	err = c.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
	switch {
	case apierrors.IsTooManyRequests(err):
		return false, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true, nil // gone already, or replaced by a successor
	case err != nil:
		return false, err
	}
	// Accepted. A pod that never ran, or has finished, is deleted at once;
	// a running one terminates within its grace period.
	got, err := c.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, nil // the next Evict call looks again
	}
	return got.UID != uid, nil
}

// skipEviction reports whether p is left alone by Evict.
func skipEviction(p *corev1.Pod) bool {
	if p.Spec.HostNetwork {
		return true
	}
	if _, ok := p.Annotations[mirrorAnnotation]; ok {
		return true
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return true
	}
	return false
}
