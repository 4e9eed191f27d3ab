//go:build !windows

package main

import (
	"context"
	"errors"
)

// errNoServices is what install and uninstall say off Windows.
var errNoServices = errors.New("services are Windows only; run `hnsplan-agent run` in the foreground (or under systemd, launchd, ...)")

// runAsService reports handled=false: only Windows has a service control
// manager, so the caller runs in the foreground.
func runAsService(name string, run func(ctx context.Context) error) (handled bool, err error) {
	return false, nil
}

// installService fails: services are Windows only.
func installService(name, exe string, args []string) error { return errNoServices }

// uninstallService fails: services are Windows only.
func uninstallService(name string) error { return errNoServices }
