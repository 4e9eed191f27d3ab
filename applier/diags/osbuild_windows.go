//go:build windows

package diags

import (
	"fmt"

	"golang.org/x/sys/windows/registry"
)

// OSBuild is the host's build as Windows Update names it, with its
// revision: 10.0.CurrentBuild.UBR and the ProductName, from
// HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion.
func OSBuild() (string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows NT\CurrentVersion`, registry.QUERY_VALUE)
	if err != nil {
		return "", err
	}
	defer k.Close()
	build, _, err := k.GetStringValue("CurrentBuild")
	if err != nil {
		return "", err
	}
	ubr, _, err := k.GetIntegerValue("UBR")
	if err != nil {
		return "", err
	}
	name, _, _ := k.GetStringValue("ProductName")
	return fmt.Sprintf("10.0.%s.%d (%s)", build, ubr, name), nil
}
