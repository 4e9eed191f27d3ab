package kube

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ExtraNodeName is the key of the user info's extra in which the API server
// names the node a ServiceAccount token is bound to: a token bound to a Node
// (Kubernetes 1.31+), or to a Pod on a node (1.32+). The admission policies of
// deploy/ admit the agent's Node patches and evictions for that node
// only.
const ExtraNodeName = "authentication.kubernetes.io/node-name"

// Identity is who the API server takes the agent's credentials for.
type Identity struct {
	User string
	// Node is the node the token is bound to, or "" if it names none (or,
	// as the admission policies read it, names more than one).
	Node string
}

// WhoAmI asks the API server (SelfSubjectReview, authentication.k8s.io/v1,
// which every authenticated user may create) who the client's credentials
// authenticate as.
func WhoAmI(ctx context.Context, client kubernetes.Interface) (Identity, error) {
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("kube: who am I (SelfSubjectReview): %w", err)
	}
	id := Identity{User: r.Status.UserInfo.Username}
	if v := r.Status.UserInfo.Extra[ExtraNodeName]; len(v) == 1 {
		id.Node = v[0]
	}
	return id, nil
}
