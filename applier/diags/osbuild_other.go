//go:build !windows

package diags

import (
	"os"
	"strings"
)

// OSBuild is the kernel's release off Windows (the in-memory HNS's
// host), for the record.
func OSBuild() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "", err
	}
	return "not Windows: kernel " + strings.TrimSpace(string(b)), nil
}
