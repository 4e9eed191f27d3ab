// Command gen writes a synthetic intent into a directory: the benchmark
// intent (synth.Benchmark), or another size:
//
//	go run ./internal/synth/gen [-windows N -linux N -pools N] DIR
//	go run ./internal/synth/gen -scale DIR   # synth.Scale, 4,500 + 500 nodes
//	go run ./internal/synth/gen -fanout DIR  # synth.FanOuts, one directory each
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hnsplan/hnsplan/internal/synth"
)

func main() {
	s := synth.Benchmark
	flag.IntVar(&s.Windows, "windows", s.Windows, "Windows nodes")
	flag.IntVar(&s.Linux, "linux", s.Linux, "Linux nodes, each with a block")
	flag.IntVar(&s.Pools, "pools", s.Pools, "IP pools (a /20 of 64 /26 blocks each)")
	scale := flag.Bool("scale", false, fmt.Sprintf("synth.Scale: %d Windows and %d Linux nodes (overrides the counts)", synth.Scale.Windows, synth.Scale.Linux))
	fanout := flag.Bool("fanout", false, "write the hostile fan-out intents (synth.FanOuts), each into DIR/NAME")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: gen [-windows N] [-linux N] [-pools N] [-scale | -fanout] DIR")
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
