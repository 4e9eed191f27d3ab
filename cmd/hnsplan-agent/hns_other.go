//go:build !windows

package main

import (
	"fmt"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/replace"
)

// defaultHNS is the in-memory HNS: the real one exists only on Windows.
const defaultHNS = "mem"

// hnsValues are the values of --hns that completion offers.
var hnsValues = []string{"mem", "mem:"}

const windowsHNSHelp = " (the host's HNS on Windows)"

func openPlatformHNS(flag string) (hns.Client, func(), error) {
	return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--hns %q: only mem and mem:FILE exist on this OS; the host's HNS is Windows only", flag)}
}

// defaultStateDir holds the replace journal and confirmations.
func defaultStateDir() string { return "/var/lib/hnsplan" }

// hostRoutes is the host's routing table as the replace sees it: only
// Windows has one HNS can disturb, so elsewhere it is in memory.
func hostRoutes() replace.HostRoutes { return replace.NewMemRoutes() }

// hostAdapters: the host's adapters matter only to the host's HNS, which
// is Windows only.
func hostAdapters(string) func() ([]string, error) { return nil }
