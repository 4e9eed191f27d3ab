//go:build unix

package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFile: a plan read never hangs on a FIFO, never reads a device,
// and never takes more than its limit.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFO:", err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, 101), 0o644)
	link := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", link)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := ReadFile(fifo, 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
		if _, err := ReadFile(link, 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("/dev/zero: %v", err)
		}
		if _, err := ReadFile(big, 100); !errors.Is(err, ErrTooLarge) {
			t.Errorf("101 bytes with a limit of 100: %v", err)
		}
		if data, err := ReadFile(big, 101); err != nil || len(data) != 101 {
			t.Errorf("101 bytes with a limit of 101: %d, %v", len(data), err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile hangs")
	}
	if _, err := Decode(make([]byte, MaxSize+1), ""); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Decode of %d bytes: %v", MaxSize+1, err)
	}
}
