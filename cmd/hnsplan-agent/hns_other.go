//go:build !windows

package main

import (
	"fmt"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// defaultHNS is the in-memory HNS: the real one exists only on Windows.
const defaultHNS = "mem"

const windowsHNSHelp = " (the host's HNS on Windows)"

func openPlatformHNS(flag string) (hns.Client, func(), error) {
	return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--hns %q: only mem and mem:FILE exist on this OS; the host's HNS is Windows only", flag)}
}
