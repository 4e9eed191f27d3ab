package planwatch_test

import (
	"context"
	"errors"
	"log"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// The agent's loop: apply each verified plan, keep the last good one on a
// rejection, and say why.
func Example() {
	ctx := context.Background()
	src := &planwatch.File{Path: `C:\ProgramData\hnsplan\plan.json`, Node: "win-1"}
	updates := make(chan planwatch.Update)
	go func() {
		if err := src.Run(ctx, updates); err != nil && !errors.Is(err, context.Canceled) {
			log.Fatal(err)
		}
	}()
	var current *plan.NodePlan
	for u := range updates {
		switch {
		case u.Plan != nil:
			current = u.Plan
			log.Printf("%s: plan %s", u.Source, current.Digest)
		case errors.Is(u.Err, planwatch.ErrAbsent):
			log.Printf("%v", u.Err) // status: waiting, or the last good plan stays
		default:
			log.Printf("rejected: %v", u.Err) // keep current
		}
	}
}
