//go:build !windows

package applier

import "errors"

// RegistryBuild is the Windows registry's OS build; elsewhere there is
// none, and the agent reads its Node's status.nodeInfo.kernelVersion.
func RegistryBuild() (string, error) {
	return "", errors.New("no Windows registry on this OS")
}
