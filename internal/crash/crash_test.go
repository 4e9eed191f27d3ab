package crash

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	var out bytes.Buffer
	code := func() (code int) {
		defer Guard("prog", &out, &code)
		var s []int
		_ = s[3] // index out of range: a runtime panic
		return 0
	}()
	if code != ExitCode {
		t.Errorf("exit code %d, want %d", code, ExitCode)
	}
	for _, want := range []string{"prog: internal error: runtime error: index out of range", "crash_test.go", "Please report it at https://github.com/hnsplan/hnsplan/issues"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestGuardWithoutPanic(t *testing.T) {
	var out bytes.Buffer
	code := func() (code int) {
		defer Guard("prog", &out, &code)
		return 2
	}()
	if code != 2 || out.Len() != 0 {
		t.Errorf("code %d, output %q: Guard must leave a normal return alone", code, out.String())
	}
}

func TestCapture(t *testing.T) {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer Capture(&err)
		panic("boom")
	}()
	<-done
	var ce *Error
	if !errors.As(err, &ce) || ce.Value != "boom" || !bytes.Contains(ce.Stack, []byte("crash_test.go")) {
		t.Errorf("Capture gave %v", err)
	}
}

// TestGoroutine runs a panicking goroutine in a child process: the
// process must end with ExitCode, not the runtime's 2.
func TestGoroutine(t *testing.T) {
	if os.Getenv("CRASH_TEST_CHILD") == "1" {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer Goroutine("child")
			panic("from a goroutine")
		}()
		<-done
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoroutine$")
	cmd.Env = append(os.Environ(), "CRASH_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode {
		t.Fatalf("child ended with %v, want exit status %d\n%s", err, ExitCode, out)
	}
	if !strings.Contains(string(out), "child: internal error: from a goroutine") {
		t.Errorf("no report:\n%s", out)
	}
}
