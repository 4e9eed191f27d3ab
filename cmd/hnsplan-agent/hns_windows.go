//go:build windows

package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/replace"
)

// defaultHNS is the host's HNS.
const defaultHNS = "windows"

const windowsHNSHelp = ", windows (the host's HNS)"

func openPlatformHNS(flag string) (hns.Client, func(), error) {
	if flag != "windows" {
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--hns %q: want windows, mem or mem:FILE", flag)}
	}
	c, err := hnswin.New()
	if err != nil {
		return nil, nil, &exitError{code: exitFailed, err: err}
	}
	return c, func() {}, nil
}

// defaultStateDir holds the replace journal and confirmations.
func defaultStateDir() string {
	return filepath.Join(cmp.Or(os.Getenv("ProgramData"), `C:\ProgramData`), "hnsplan")
}

// hostRoutes is the host's IP routing table, which creating a network can
// disturb (the vSwitch takes over the NIC).
func hostRoutes() replace.HostRoutes { return replace.WindowsRoutes{} }
