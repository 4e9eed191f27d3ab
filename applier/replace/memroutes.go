package replace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hnsplan/hnsplan/applier/hns"
)

var _ HostRoutes = (*MemRoutes)(nil)

// MemRoutes is an in-memory host routing table, for tests, dry runs and
// the demo. It is safe for concurrent use.
type MemRoutes struct {
	mu      sync.Mutex
	routes  []Route
	nextIdx uint32
	adds    int
	failAdd error
}

// NewMemRoutes returns a table holding routes.
func NewMemRoutes(routes ...Route) *MemRoutes {
	m := &MemRoutes{routes: slices.Clone(routes), nextIdx: 100} // new interfaces get indexes from 100 up
	for _, r := range routes {
		m.nextIdx = max(m.nextIdx, r.IfIndex+1)
	}
	return m
}

// List returns a copy of the table.
func (m *MemRoutes) List(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.routes), nil
}

// Add adds r unless the table has it (same prefix, next hop and
// interface).
func (m *MemRoutes) Add(ctx context.Context, r Route) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failAdd; err != nil {
		m.failAdd = nil
		return err
	}
	m.adds++
	for _, h := range m.routes {
		if h.key() == r.key() && h.IfIndex == r.IfIndex {
			return nil
		}
	}
	m.routes = append(m.routes, r)
	return nil
}

// Adds counts the Add calls that got past FailNextAdd.
func (m *MemRoutes) Adds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.adds
}

// FailNextAdd makes the next Add fail with err.
func (m *MemRoutes) FailNextAdd(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAdd = err
}

// BindVSwitch models what binding an external vSwitch to the NIC nic does
// to the host's routes: the NIC's automatic routes move to a new interface
// "vEthernet (nic)" with a new index, and the routes added on it by hand
// or by an agent are lost. A NIC already bound (its routes already on
// "vEthernet (nic)") is bound again: the model assumes the worst, since
// deleting the last network may unbind the vSwitch and creating one binds
// it anew.
func (m *MemRoutes) BindVSwitch(nic string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alias := "vEthernet (" + nic + ")"
	idx := m.nextIdx
	m.nextIdx++
	out := m.routes[:0]
	for _, r := range m.routes {
		if r.IfAlias == nic || r.IfAlias == alias {
			if !r.Automatic {
				continue // lost
			}
			r.IfIndex, r.IfAlias = idx, alias
		}
		out = append(out, r)
	}
	m.routes = out
}

// String renders the table, sorted, one route a line.
func (m *MemRoutes) String() string {
	m.mu.Lock()
	lines := make([]string, len(m.routes))
	for i, r := range m.routes {
		lines[i] = r.String()
	}
	m.mu.Unlock()
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// VSwitchLosesRoutes wraps an HNS client so that every successful create
// (or replace) of an Overlay or L2Bridge network binds the vSwitch to nic
// in routes (MemRoutes.BindVSwitch): what the first HNS network does to a
// Windows host's routing table.
func VSwitchLosesRoutes(c hns.Client, routes *MemRoutes, nic string) hns.Client {
	return &vswitchClient{Client: c, routes: routes, nic: nic}
}

type vswitchClient struct {
	hns.Client
	routes *MemRoutes
	nic    string
}

func (c *vswitchClient) Apply(ctx context.Context, op hns.Op) error {
	if err := c.Client.Apply(ctx, op); err != nil {
		return err
	}
	if op.Kind == hns.KindNetwork && (op.Action == hns.Create || op.Action == hns.Replace) && op.NetworkSpec != nil {
		switch op.NetworkSpec.Type {
		case "Overlay", "L2Bridge":
			c.routes.BindVSwitch(c.nic)
		}
	}
	return nil
}

func (c *vswitchClient) String() string { return fmt.Sprintf("vswitch(%s)", c.nic) }
