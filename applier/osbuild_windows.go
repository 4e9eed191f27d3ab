//go:build windows

package applier

import (
	"fmt"

	"golang.org/x/sys/windows/registry"
)

// RegistryBuild reads the OS build from the registry as Windows keeps
// it: HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion, CurrentBuild
// (a string, "20348") and UBR (a DWORD, the update build revision). It
// is 10.0.<CurrentBuild>.<UBR>, the form of a Node's kernelVersion.
func RegistryBuild() (string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows NT\CurrentVersion`, registry.QUERY_VALUE)
	if err != nil {
		return "", fmt.Errorf("open HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion: %w", err)
	}
	defer k.Close()
	build, _, err := k.GetStringValue("CurrentBuild")
	if err != nil {
		return "", fmt.Errorf("read CurrentBuild: %w", err)
	}
	ubr, _, err := k.GetIntegerValue("UBR")
	if err != nil {
		return "", fmt.Errorf("read UBR: %w", err)
	}
	return fmt.Sprintf("10.0.%s.%d", build, ubr), nil
}
