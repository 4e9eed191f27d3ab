package kubetest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestUniqueName: the names are DNS-1123 labels, as node, namespace and
// pod names must be, up to the longest prefix the contract allows, and
// two in a row differ.
func TestUniqueName(t *testing.T) {
	for _, prefix := range []string{"win-drain", "it", strings.Repeat("a", 52)} {
		a, b := UniqueName(prefix), UniqueName(prefix)
		if errs := validation.IsDNS1123Label(a); len(errs) > 0 {
			t.Errorf("%q: %v", a, errs)
		}
		if !strings.HasPrefix(a, prefix+"-") {
			t.Errorf("%q does not start with %q", a, prefix+"-")
		}
		if a == b {
			t.Errorf("two names in a row are both %q", a)
		}
	}
}
