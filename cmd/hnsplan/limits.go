package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hnsplan/hnsplan/compiler"
	"github.com/hnsplan/hnsplan/compiler/intent"
)

// limits bound what reading an intent may take: an intent is untrusted
// input (a pull request, which CI vets).
type limits struct {
	maxFileSize byteSize
	cueTimeout  time.Duration
	cueMemory   byteSize
	maxTime     time.Duration
	maxMemory   byteSize
}

// inputLimits are the limits of this run, from the flags of the command
// that reads an intent; newRoot sets them to their defaults.
var inputLimits limits

func defaultLimits() limits {
	return limits{maxFileSize: intent.DefaultMaxFileSize, cueTimeout: intent.DefaultCUETimeout, cueMemory: intent.DefaultCUEMemory,
		maxTime: compiler.DefaultMaxTime, maxMemory: compiler.DefaultMaxMemory}
}

// addLimitFlags adds the limits as flags of cmd, a command that reads an
// intent, at inputLimits' values (the defaults).
func addLimitFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Var(&inputLimits.maxFileSize, "max-file-size", "largest file of an intent or inventory read (e.g. 16MiB); larger files are errors")
	f.DurationVar(&inputLimits.cueTimeout, "cue-timeout", inputLimits.cueTimeout, "longest CUE evaluation of an intent; over it, the command stops with an error")
	f.Var(&inputLimits.cueMemory, "cue-memory", "most memory a CUE evaluation of an intent may take (resident set and Go memory, beyond what was held before it; e.g. 2GiB); over it, the command stops with an error")
	f.DurationVar(&inputLimits.maxTime, "max-time", inputLimits.maxTime, "longest the whole reading, vetting and compiling of an intent (and its inventory) may take; over it, the command stops with an error")
	f.Var(&inputLimits.maxMemory, "max-memory", "most memory the whole reading, vetting and compiling of an intent (and its inventory) may take (resident set and Go memory; e.g. 4GiB); over it, the command stops with an error")
}

// options are compiler.Build's options for these limits.
func (l limits) options(inventory []string) compiler.Options {
	return compiler.Options{Inventory: inventory, MaxFileSize: int64(l.maxFileSize), CUETimeout: l.cueTimeout, CUEMemory: int64(l.cueMemory),
		MaxTime: l.maxTime, MaxMemory: int64(l.maxMemory)}
}

// load are intent.Load's options for these limits (completion reads an
// intent as the commands do).
func (l limits) load(inventory []string) intent.Options {
	return intent.Options{Inventory: inventory, MaxFileSize: int64(l.maxFileSize), CUETimeout: l.cueTimeout, CUEMemory: int64(l.cueMemory)}
}

// byteSize is a flag value in bytes, written "16MiB", "2GiB", "512KiB",
// "1000" (bytes), or with KB/MB/GB (powers of 1000).
type byteSize int64

var byteUnits = []struct {
	suffix string
	size   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.size
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size: write e.g. 16MiB, 2GiB or a number of bytes", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b byteSize) String() string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b > 0 && int64(b)%u.size == 0 {
			return fmt.Sprintf("%d%s", int64(b)/u.size, u.suffix)
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

func (b *byteSize) Type() string { return "size" }
