//go:build windows

package main

import (
	"fmt"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
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
