package plan

import (
	"strings"
	"testing"
)

func TestCheckNodeName(t *testing.T) {
	for _, tt := range []struct {
		node string
		err  string // "" for valid
	}{
		{"win-1", ""},
		{"index", ""},
		{"a.b.c", ""},
		{strings.Repeat("a", MaxNodeNameLen), ""},
		{strings.Repeat("a", MaxNodeNameLen+1), "too long"},
		{"", "not a Kubernetes node name"},
		{"..", "not a Kubernetes node name"},
		{"a/b", "not a Kubernetes node name"},
		{"Win-1", "not a Kubernetes node name"},
		{"_index", "not a Kubernetes node name"},
		{"con", "device name"},
		{"nul.example", "device name"},
		{"com1", "device name"},
		{"console", ""},
	} {
		err := CheckNodeName(tt.node)
		if (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("CheckNodeName(%q) = %v, want %q", tt.node, err, tt.err)
		}
	}
}
