package completion

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/intent"
)

// inventory writes an inventory of pods, one per "NS/NAME".
func inventory(t *testing.T, pods ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i, p := range pods {
		ns, name, _ := strings.Cut(p, "/")
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: Pod, metadata: {name: %s, namespace: %s}, spec: {nodeName: win-1}, status: {podIP: 192.168.0.%d}}\n", name, ns, i+2)
	}
	file := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestPods(t *testing.T) {
	small := inventory(t, "web/iis-2", "web/iis-1", "frontend/shop-1")
	var many []string
	for i := range 30 {
		many = append(many, fmt.Sprintf("ns-%d/pod-%02d", i%3, i))
	}
	large := inventory(t, many...)
	cases := []struct {
		file, prefix string
		want         []string
	}{
		{small, "", []string{"frontend/shop-1", "web/iis-1", "web/iis-2"}},
		{small, "web/", []string{"web/iis-1", "web/iis-2"}},
		{small, "x", nil},
		// Past 20 pods, the namespaces first; then the pods of the one typed.
		{large, "", []string{"ns-0/", "ns-1/", "ns-2/"}},
		{large, "ns-1/pod-0", []string{"ns-1/pod-01", "ns-1/pod-04", "ns-1/pod-07"}},
		{filepath.Join(t.TempDir(), "nosuch.yaml"), "", nil},
	}
	for _, c := range cases {
		if got := Pods(intent.Options{Inventory: []string{c.file}}, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("Pods(%s, %q) = %q, want %q", filepath.Base(c.file), c.prefix, got, c.want)
		}
	}
	if got := Pods(intent.Options{}, ""); got != nil {
		t.Errorf("Pods without an inventory = %q", got)
	}
}

func TestWindowsNodes(t *testing.T) {
	dir := "../../examples/calico-vxlan"
	if got, want := WindowsNodes(dir, intent.Options{}, ""), []string{"win-1", "win-2", "win-3"}; !slices.Equal(got, want) {
		t.Errorf("WindowsNodes = %q, want %q", got, want)
	}
	if got := WindowsNodes(t.TempDir(), intent.Options{}, ""); got != nil {
		t.Errorf("WindowsNodes of an empty directory = %q", got)
	}
}
