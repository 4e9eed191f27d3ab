package main

import (
	"runtime/debug"
	"testing"
)

// TestSetMemoryLimit: --memory-limit sets the runtime's soft limit, 0
// sets none, a bad size is an error; GOMEMLIMIT wins over the flag.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	for _, tc := range []struct {
		flag string
		want int64
		bad  bool
	}{{"224Mi", 224 << 20, false}, {"1Gi", 1 << 30, false}, {"0", 0, false}, {"lots", 0, true}, {"-5Mi", 0, true}} {
		got, err := setMemoryLimit(tc.flag, nil)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("setMemoryLimit(%q) = %d, %v; want %d (error: %v)", tc.flag, got, err, tc.want, tc.bad)
		}
		if got > 0 && debug.SetMemoryLimit(-1) != got {
			t.Errorf("setMemoryLimit(%q): the runtime's limit is %d", tc.flag, debug.SetMemoryLimit(-1))
		}
	}
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20) // as the runtime did at start
	if got, err := setMemoryLimit("224Mi", nil); err != nil || got != 300<<20 {
		t.Errorf("with GOMEMLIMIT=300MiB: %d, %v; want GOMEMLIMIT's", got, err)
	}
}
