package hnsmem

// String renders the whole state as sorted, stable text for golden tests:
// hns.State.String of the canonical state (networks by name, routes by
// prefix, endpoints by name, load balancers by ID).
func (m *HNS) String() string {
	m.mu.Lock()
	s := cloneState(&m.st)
	m.mu.Unlock()
	s.Canonical()
	return s.String()
}
