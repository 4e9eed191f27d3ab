//go:build windows

package replace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

var _ HostRoutes = WindowsRoutes{}

// WindowsRoutes is the host's routing table on Windows. List reads it
// with GetIpForwardTable2 (iphlpapi); Add runs New-NetRoute, the
// documented cmdlet, in the active store only: the route is restored now,
// and making it survive a reboot stays with whoever made it (a cloud
// agent re-adds its routes at boot).
type WindowsRoutes struct{}

// List returns every IPv4 and IPv6 route.
func (WindowsRoutes) List(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var t *windows.MibIpForwardTable2
	if err := windows.GetIpForwardTable2(windows.AF_UNSPEC, &t); err != nil {
		return nil, fmt.Errorf("GetIpForwardTable2: %w", err)
	}
	defer windows.FreeMibTable(unsafe.Pointer(t))
	aliases := map[uint32]string{}
	var out []Route
	for _, row := range t.Rows() {
		dst, ok := sockaddrAddr(&row.DestinationPrefix.Prefix)
		if !ok {
			continue
		}
		nh, _ := sockaddrAddr(&row.NextHop)
		alias, seen := aliases[row.InterfaceIndex]
		if !seen {
			if ifc, err := net.InterfaceByIndex(int(row.InterfaceIndex)); err == nil {
				alias = ifc.Name // the interface alias ("vEthernet (Ethernet)")
			}
			aliases[row.InterfaceIndex] = alias
		}
		out = append(out, Route{
			Prefix:    netip.PrefixFrom(dst, int(row.DestinationPrefix.PrefixLength)),
			NextHop:   nh,
			IfIndex:   row.InterfaceIndex,
			IfAlias:   alias,
			Metric:    row.Metric,
			Automatic: row.Protocol == windows.MIB_IPPROTO_LOCAL || row.Origin == windows.NlroWellKnown,
		})
	}
	return out, nil
}

// sockaddrAddr reads the address of a SOCKADDR_INET: after the family and
// port, an IPv4 address, or an IPv6 flow label then address.
func sockaddrAddr(s *windows.RawSockaddrInet) (netip.Addr, bool) {
	b := (*[24]byte)(unsafe.Pointer(&s.Data))
	switch s.Family {
	case windows.AF_INET:
		return netip.AddrFrom4([4]byte(b[0:4])), true
	case windows.AF_INET6:
		return netip.AddrFrom16([16]byte(b[4:20])), true
	}
	return netip.Addr{}, false
}

// Add adds r with New-NetRoute, unless the table already has it on that
// interface (New-NetRoute refuses a duplicate).
func (w WindowsRoutes) Add(ctx context.Context, r Route) error {
	have, err := w.List(ctx)
	if err != nil {
		return err
	}
	for _, h := range have {
		if h.key() == r.key() && h.IfIndex == r.IfIndex {
			return nil
		}
	}
	nh := r.NextHop
	if !r.gateway() {
		nh = netip.IPv4Unspecified()
		if r.Prefix.Addr().Is6() {
			nh = netip.IPv6Unspecified()
		}
	}
	// Every value is a number or a netip value's String: nothing to quote.
	cmd := fmt.Sprintf("New-NetRoute -DestinationPrefix '%s' -InterfaceIndex %d -NextHop '%s' -RouteMetric %d -PolicyStore ActiveStore -ErrorAction Stop | Out-Null",
		r.Prefix.Masked(), r.IfIndex, nh, r.Metric)
	out, err := exec.CommandContext(ctx, "powershell.exe", "-NoProfile", "-NonInteractive", "-Command", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("add host route %s: %s: %w: %s", r, cmd, err, strings.TrimSpace(string(out)))
	}
	return nil
}
