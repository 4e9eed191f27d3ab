//go:build windows

package main

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/replace"
)

// defaultHNS is the host's HNS.
const defaultHNS = "windows"

// hnsValues are the values of --hns that completion offers.
var hnsValues = []string{"windows", "windows-v1", "mem", "mem:"}

// windowsHNSHelp names the values of --hns that open the host's HNS. They
// differ only in how an endpoint's ACL list is written (hnswin.ACLForm;
// see the hnswin package documentation for why both exist).
const windowsHNSHelp = ", windows (the host's HNS; ACL lists written through HNS v2, as Azure NPM writes them)" +
	" or windows-v1 (the host's HNS; ACL lists written through HNS v1, as Calico Felix writes them: try it if an ACL update" +
	" through v2 changes another CNI's endpoint policies)"

func openPlatformHNS(flag string) (hns.Client, func(), error) {
	var form hnswin.ACLForm
	switch flag {
	case "windows":
		form = hnswin.ACLFormV2
	case "windows-v1":
		form = hnswin.ACLFormV1
	default:
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf("--hns %q: want windows, windows-v1, mem or mem:FILE", flag)}
	}
	c, err := hnswin.New(hnswin.WithACLForm(form))
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

// hostAdapters lists the host's network adapters for the audit's adapter
// check, with the host's HNS (--hns windows*): GetAdaptersAddresses
// through net.Interfaces, whose names are the adapters' friendly names,
// the form of a network's NetAdapterName. nil for the in-memory HNS.
func hostAdapters(flag string) func() ([]string, error) {
	if flag != "windows" && flag != "windows-v1" {
		return nil
	}
	return func() ([]string, error) {
		ifs, err := net.Interfaces()
		if err != nil {
			return nil, err
		}
		names := make([]string, len(ifs))
		for i, f := range ifs {
			names[i] = f.Name
		}
		return names, nil
	}
}
