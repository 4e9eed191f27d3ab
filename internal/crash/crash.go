// Package crash turns a panic into exit status 1 and a report that says
// how to file it. Go's runtime ends a process whose panic nobody recovers
// with exit status 2, and 2 is a meaningful answer of both binaries
// (`hnsplan diff --detailed-exitcode`: changes found): a crash must never
// be read as that.
//
// A recover covers only the goroutine it runs in. The binaries use Guard
// at the top of their command's goroutine (main's), and Goroutine or
// Capture in every goroutine they start themselves. A goroutine that a
// library starts (client-go's informers, net/http's connections, which
// recover their handlers themselves) is outside this package's reach.
package crash

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// ExitCode is the exit status of a recovered panic: "failure", never the
// runtime's 2.
const ExitCode = 1

// Report is how a panic is reported: what happened, the stack, and what to
// do about it.
func Report(prog string, v any, stack []byte) string {
	return fmt.Sprintf("%s: internal error: %v\n\n%s\nThis is a bug in %s, not in your input. Please report it at https://github.com/hnsplan/hnsplan/issues with the command line, the output above and, if you can, the input that caused it.\n",
		prog, v, stack, prog)
}

// Guard recovers a panic of the calling goroutine, writes its report to w
// and sets *code to ExitCode. Use it deferred, at the top of the function
// that returns the process's exit code:
//
//	func run(...) (code int) {
//		defer crash.Guard("hnsplan", stderr, &code)
func Guard(prog string, w io.Writer, code *int) {
	if v := recover(); v != nil {
		io.WriteString(w, Report(prog, v, debug.Stack()))
		*code = ExitCode
	}
}

// An Error is a panic of another goroutine, recovered by Capture so that
// the goroutine that waits for it returns it as an error.
type Error struct {
	Value any
	Stack []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("internal error: %v\n\n%s", e.Value, e.Stack)
}

// Capture recovers a panic of the calling goroutine into *err, as an
// *Error with its stack. Use it deferred in a worker goroutine whose
// errors its caller collects:
//
//	go func() { defer crash.Capture(&errs[i]); ... }()
func Capture(err *error) {
	if v := recover(); v != nil {
		*err = &Error{Value: v, Stack: debug.Stack()}
	}
}

var exitMu sync.Mutex

// Goroutine recovers a panic of a long-lived goroutine that has nobody to
// return an error to (a server loop, a watcher): it writes the report to
// stderr and ends the process with ExitCode, since the process cannot go
// on without the goroutine. Use it deferred at the goroutine's top.
func Goroutine(prog string) {
	if v := recover(); v != nil {
		exitMu.Lock() // one report, even if two goroutines panic at once
		os.Stderr.WriteString(Report(prog, v, debug.Stack()))
		os.Exit(ExitCode)
	}
}
