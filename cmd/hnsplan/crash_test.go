package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestPanicExitsOne: a panic in a command is an internal error with exit
// status 1, never the runtime's 2 (diff --detailed-exitcode's "changes").
func TestPanicExitsOne(t *testing.T) {
	var stdout, stderr bytes.Buffer
	root := newRoot(&stdout, &stderr)
	root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
		var m map[string]int
		m["x"] = 1 // assignment to a nil map: a runtime panic
		return nil
	}})
	if code := execute(root, []string{"boom"}, &stderr); code != exitInvalid {
		t.Errorf("exit code %d, want %d", code, exitInvalid)
	}
	if s := stderr.String(); !strings.Contains(s, "hnsplan: internal error: assignment to entry in nil map") || !strings.Contains(s, "Please report it") {
		t.Errorf("stderr:\n%s", s)
	}
}
