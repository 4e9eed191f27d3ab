// Package completion finds what hnsplan's shell completion offers from the
// user's own files: the Windows nodes of an intent, the pods of an
// inventory. It reads them as the commands do (intent.Load, bounded by the
// same limits) and never fails loudly: a completion that cannot read its
// input offers nothing.
package completion

import (
	"slices"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// WindowsNodes returns the names of the Windows nodes of the intent in
// dir, sorted, that start with prefix. An intent that does not load far
// enough to list its nodes gives none.
func WindowsNodes(dir string, opts intent.Options, prefix string) []string {
	opts.Inventory = nil // the nodes are the intent's; the inventory adds none
	in, _, err := intent.Load(dir, opts)
	if err != nil || in == nil || in.Cluster == nil {
		return nil
	}
	var out []string
	for _, n := range in.Cluster.Nodes {
		if n.IsWindows() && strings.HasPrefix(n.Name, prefix) {
			out = append(out, n.Name)
		}
	}
	return out
}

// Pods returns every pod of the inventory files opts.Inventory as
// NAMESPACE/NAME, sorted, that starts with prefix: what explain's --from
// and --to take. Before a "/" is typed, the namespaces come first (as
// NAMESPACE/), so that a shell completes a large inventory in two steps.
func Pods(opts intent.Options, prefix string) []string {
	if len(opts.Inventory) == 0 {
		return nil
	}
	inv, _, err := intent.ReadInventory(opts)
	if err != nil {
		return nil
	}
	var pods []string
	for _, p := range inv.Pods {
		if id := p.Namespace + "/" + p.Name; strings.HasPrefix(id, prefix) {
			pods = append(pods, id)
		}
	}
	slices.Sort(pods)
	pods = slices.Compact(pods)
	if strings.Contains(prefix, "/") || len(pods) <= 20 {
		return pods
	}
	var namespaces []string
	for _, id := range pods {
		ns, _, _ := strings.Cut(id, "/")
		namespaces = append(namespaces, ns+"/")
	}
	return slices.Compact(namespaces)
}
