package applier_test

import (
	"context"
	"sync"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnsmem"
)

// windowHNS records, of the network ops applied, when the first network
// was deleted and when the last one on the VNI vni says was created.
type windowHNS struct {
	*hnsmem.HNS
	vni func() uint32
	w   *window
}

// window is when a rollout's first network was deleted and its last new
// one created.
type window struct {
	mu          sync.Mutex
	first, last time.Time
}

func (w *window) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.first, w.last = time.Time{}, time.Time{}
}

// span is from the first delete to the last create; 0 before both.
func (w *window) span() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() || w.last.IsZero() {
		return 0
	}
	return w.last.Sub(w.first)
}

func (h *windowHNS) Apply(ctx context.Context, op hns.Op) error {
	err := h.HNS.Apply(ctx, op)
	if err != nil || op.Kind != hns.KindNetwork {
		return err
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	now := time.Now()
	switch {
	case op.Action == hns.Delete && h.w.first.IsZero():
		h.w.first = now
	case op.Action == hns.Create && op.NetworkSpec != nil && len(op.NetworkSpec.Subnets) > 0 && op.NetworkSpec.Subnets[0].VNI == h.vni():
		h.w.last = now
	}
	return nil
}
