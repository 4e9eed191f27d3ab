package audit

import (
	"fmt"
	"io"
)

// WriteText writes r for a person: each kind found with its count and
// items (at most MaxItems; the rest counted), what was not checked, and
// the load balancers.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	plan := r.Plan
	if plan == "" {
		plan = "(none)"
	}
	ew.printf("HNS audit of node %s, plan %s (pods from the %s)\n", r.Node, plan, r.PodsFrom)
	for _, f := range r.Findings {
		if f.Count == 0 {
			continue
		}
		what := "problem"
		if !f.Problem {
			what = "reported, never touched"
		}
		ew.printf("%s: %d (%s)\n", f.Kind, f.Count, what)
		for _, it := range f.Items {
			name := it.Network
			if it.Endpoint != "" {
				name += "/" + it.Endpoint
			}
			ew.printf("  %s: %s\n", name, it.Detail)
		}
		if n := f.Count - len(f.Items); n > 0 {
			ew.printf("  and %d more\n", n)
		}
	}
	for _, s := range r.NotChecked {
		ew.printf("not checked: %s\n", s)
	}
	ew.printf("load balancers: %d (kube-proxy's; not compared with the Services)\n", r.LoadBalancers)
	if r.Problems == 0 {
		ew.printf("no problems found\n")
	} else {
		ew.printf("%d problems found\n", r.Problems)
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
