package hns

// DefaultRouteBatch is how many routes one batched call adds or removes
// at most: a whole cluster's routes in a handful of calls, while one
// request stays small (500 RemoteSubnetRoute policies are about 80 KB of
// JSON).
const DefaultRouteBatch = 500

// BatchRoutes groups Diff's route ops into KindRoutes ops of at most size
// routes each: each run of consecutive route ops of one network and one
// action (Create or Delete) becomes ceil(run/size) ops, in the order of
// the run. Every other op keeps its place, so the order Diff gives holds:
// a changed VTEP's old route is removed (in an earlier batch) before its
// new one is added. A size below 2 returns ops unchanged: one call per
// route.
//
// Diff keeps one op per route, for the operator and the tests: batching
// is how the applier calls HNS, not what differs.
func BatchRoutes(ops []Op, size int) []Op {
	if size < 2 {
		return ops
	}
	out := make([]Op, 0, len(ops))
	for i := 0; i < len(ops); {
		op := ops[i]
		if !batchable(op) {
			out = append(out, op)
			i++
			continue
		}
		j := i
		var routes []RemoteRoute
		for ; j < len(ops) && batchable(ops[j]) && ops[j].Network == op.Network && ops[j].Action == op.Action; j++ {
			routes = append(routes, *ops[j].RouteSpec)
		}
		for k := 0; k < len(routes); k += size {
			chunk := routes[k:min(k+size, len(routes))]
			reason := "absent"
			if op.Action == Delete {
				reason = "not in the plan"
			}
			out = append(out, Op{Action: op.Action, Kind: KindRoutes, Name: op.Network, Network: op.Network,
				Routes: chunk, Reason: reason})
		}
		i = j
	}
	return out
}

func batchable(op Op) bool {
	return op.Kind == KindRoute && op.RouteSpec != nil && (op.Action == Create || op.Action == Delete)
}

// RouteOps are the one-route ops of a KindRoutes op, in its order.
func RouteOps(batch Op) []Op {
	out := make([]Op, len(batch.Routes))
	for i := range batch.Routes {
		r := batch.Routes[i]
		out[i] = Op{Action: batch.Action, Kind: KindRoute, Name: r.Prefix.String(), Network: batch.Network, RouteSpec: &r, Reason: batch.Reason}
	}
	return out
}

// RoutesLeft are the routes of a KindRoutes op that HNS (as read in have)
// does not hold as the op wants: for an add, those not there; for a
// remove, those still there. A batch that failed may have landed in
// part: what is left is what to do again.
func RoutesLeft(have *State, batch Op) []RemoteRoute {
	n := have.Network(batch.Network)
	if n == nil {
		if batch.Action == Delete {
			return nil // gone with their network
		}
		return batch.Routes
	}
	held := make(map[RemoteRoute]bool, len(n.RemoteRoutes))
	for _, r := range n.RemoteRoutes {
		held[r] = true
	}
	var left []RemoteRoute
	for _, r := range batch.Routes {
		if held[r] == (batch.Action == Delete) {
			left = append(left, r)
		}
	}
	return left
}
