package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	for _, op := range hns.BatchRoutes(ops, size) {
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
