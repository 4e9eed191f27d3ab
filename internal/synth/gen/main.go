// Command gen writes a synthetic intent into a directory: the benchmark
// intent (synth.Benchmark), or another size:
//
//	go run ./internal/synth/gen [-windows N -linux N -pools N] DIR
//	go run ./internal/synth/gen -scale DIR   # synth.Scale, 4,500 + 500 nodes
//	go run ./internal/synth/gen -fanout DIR  # synth.FanOuts, one directory each
//	go run ./internal/synth/gen -workload big -inventory INV DIR
//	    # the policy benchmark's cluster (workload.Big: 2,000 policies,
//	    # 30,000 pods; or small): the intent in DIR, the pods in INV
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hnsplan/hnsplan/internal/synth"
	"github.com/hnsplan/hnsplan/internal/synth/workload"
)

func main() {
	s := synth.Benchmark
	flag.IntVar(&s.Windows, "windows", s.Windows, "Windows nodes")
	flag.IntVar(&s.Linux, "linux", s.Linux, "Linux nodes, each with a block")
	flag.IntVar(&s.Pools, "pools", s.Pools, "IP pools (a /20 of 64 /26 blocks each)")
	scale := flag.Bool("scale", false, fmt.Sprintf("synth.Scale: %d Windows and %d Linux nodes (overrides the counts)", synth.Scale.Windows, synth.Scale.Linux))
	fanout := flag.Bool("fanout", false, "write the hostile fan-out intents (synth.FanOuts), each into DIR/NAME")
	wl := flag.String("workload", "", "write the policy workload big (2,000 policies, 30,000 pods) or small (1,000 pods) instead, with its inventory at -inventory")
	inv := flag.String("inventory", "", "with -workload: where to write the inventory (namespaces and pods)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gen [-windows N] [-linux N] [-pools N] [-scale | -fanout] DIR")
		fmt.Fprintln(os.Stderr, "       gen -workload big|small -inventory INV DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(3)
	}
	if *scale {
		s = synth.Scale
	}
	dir := flag.Arg(0)
	if *wl != "" {
		cfg, ok := map[string]workload.Config{"big": workload.Big, "small": workload.Small}[*wl]
		if !ok || *inv == "" {
			fmt.Fprintln(os.Stderr, "gen: -workload is big or small, and needs -inventory FILE")
			os.Exit(3)
		}
		if err := workload.WriteIntent(workload.Generate(cfg), dir, *inv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if *fanout {
		for _, c := range synth.FanOuts() {
			if err := synth.WriteFanOut(filepath.Join(dir, c.Name), c); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := synth.Write(dir, s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
