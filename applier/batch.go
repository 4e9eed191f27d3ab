package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// applyOps applies Diff's ops in order, the routes of one network in
// batches (hns.BatchRoutes, r.RouteBatch routes a call), and returns how
// many of ops took effect: all of them, or those before the one that
// failed, counting a failed batch's routes that landed. Its error names
// the op (or route) that failed.
func (r *Reconciler) applyOps(ctx context.Context, ops []hns.Op) (int, error) {
	size := r.RouteBatch
	if size == 0 {
		size = hns.DefaultRouteBatch
	}
	done := 0
	batched := hns.BatchRoutes(ops, size)
	for i := 0; i < len(batched); i++ {
		op := batched[i]
		if op.Kind == hns.KindACL && r.aclWriters() > 1 {
			// A run of ACL writes, each to its own endpoint: in parallel.
			j := i
			for j < len(batched) && batched[j].Kind == hns.KindACL {
				j++
			}
			n, err := r.applyACLs(ctx, batched[i:j])
			done += n
			if err != nil {
				return done, err
			}
			i = j - 1
			continue
		}
		if op.Kind != hns.KindRoutes {
			if err := r.apply(ctx, op); err != nil {
				return done, fmt.Errorf("%s: %w", strings.TrimSpace(op.String()), err)
			}
			done++
			continue
		}
		n, err := r.applyBatch(ctx, op)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// aclWriters is how many ACL writes run at once (Reconciler.ACLWriters).
func (r *Reconciler) aclWriters() int {
	if r.ACLWriters <= 0 {
		return DefaultACLWriters
	}
	return r.ACLWriters
}

// DefaultACLWriters is how many endpoints' ACL lists a pass writes at
// once: a burst of new pods is protected that many times sooner when HNS
// is slow to program a list, and HNS already takes concurrent calls
// (each pod's CNI ADD, kube-proxy). Each endpoint is written by one call.
const DefaultACLWriters = 4

// applyACLs applies ACL ops, each to another endpoint, r.aclWriters() at
// a time, and returns how many took effect. After a failure no new one
// starts; the error names the first op that failed.
func (r *Reconciler) applyACLs(ctx context.Context, ops []hns.Op) (int, error) {
	var (
		mu    sync.Mutex
		done  int
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, r.aclWriters())
	for _, op := range ops {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := r.apply(ctx, op)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				done++
			} else if first == nil {
				first = fmt.Errorf("%s: %w", strings.TrimSpace(op.String()), err)
			}
		}()
	}
	wg.Wait()
	return done, first
}

// applyBatch applies a batched route op and returns how many of its
// routes HNS holds as wanted at the end. A failed batch is never taken to
// have done all or nothing: the network is read back (hns.RoutesLeft) and
// only what is left is sent again, after a transient error up to
// r.Attempts calls in all. A batch HNS refuses is split in halves, and
// both halves applied in turn, until each route HNS refuses is alone:
// every route it accepts lands, and the error names the first route it
// refuses.
func (r *Reconciler) applyBatch(ctx context.Context, op hns.Op) (int, error) {
	attempts := r.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	total, left := len(op.Routes), op.Routes
	for a := 1; ; a++ {
		call := op
		call.Routes = left
		err := r.HNS.Apply(ctx, call)
		if r.Metrics != nil {
			r.Metrics.op(call, err)
		}
		if err == nil {
			return total, nil
		}
		have, rerr := r.HNS.Snapshot(ctx)
		if rerr != nil {
			return total - len(left), fmt.Errorf("%s: %w (reading the network back to learn which routes landed: %v)", strings.TrimSpace(call.String()), err, rerr)
		}
		before := len(left)
		left = hns.RoutesLeft(have, call)
		if r.Log != nil && len(left) != before {
			r.Log.Info("a failed route batch landed in part", "network", op.Network, "landed", before-len(left), "of", before, "err", err)
		}
		switch {
		case len(left) == 0:
			return total, nil // it landed; the reply said otherwise
		case hns.IsTransient(err) && a < attempts:
			select {
			case <-ctx.Done():
				return total - len(left), errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(a*a) * 50 * time.Millisecond):
			}
			continue
		case len(left) == 1:
			one := hns.RouteOps(hns.Op{Action: op.Action, Network: op.Network, Routes: left, Reason: op.Reason})[0]
			return total - 1, fmt.Errorf("%s: %w", strings.TrimSpace(one.String()), err)
		case hns.IsTransient(err) || hns.IsNotFound(err) || ctx.Err() != nil:
			// Splitting would not help: HNS is busy, or the network is gone.
			return total - len(left), fmt.Errorf("%s: %w", strings.TrimSpace(call.String()), err)
		}
		// Both halves are applied even if the first fails, so that one
		// route HNS refuses keeps no other route of the batch out.
		done := total - len(left)
		var first error
		for _, half := range [][]hns.RemoteRoute{left[:len(left)/2], left[len(left)/2:]} {
			part := op
			part.Routes = half
			n, err := r.applyBatch(ctx, part)
			done += n
			if first == nil {
				first = err
			}
		}
		return done, first
	}
}
