// Command gen writes the benchmark intent into a directory:
//
//	go run ./internal/synth/gen DIR
package main

import (
	"fmt"
	"os"

	"github.com/hnsplan/hnsplan/internal/synth"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR")
		os.Exit(3)
	}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := synth.Write(os.Args[1], synth.Benchmark); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
