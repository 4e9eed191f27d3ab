package planwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// Defaults for a File's zero fields.
const (
	DefaultDebounce = 200 * time.Millisecond
	DefaultResync   = time.Minute
)

// A File is a Source that reads the plan from a file.
//
// It watches the file's directory, not the file: plans arrive by atomic
// rename (a new inode each time, which a watch on the file would lose),
// the file may not exist yet, and it may be removed and created again.
// Any change in the directory starts a debounce; when the directory has
// been quiet for Debounce the file is read and verified once, so a burst
// of writes or renames yields one Update, for the last content. Every
// event counts, not only those naming the file, because a ConfigMap
// volume or a symlink swap changes the file's content through another
// name; reading an unchanged plan again costs a read and a hash and sends
// nothing.
//
// A file that does not exist is reported as ErrAbsent (once per absence);
// the last good plan stays in force. A file being written in place may be
// read half-written: that is a rejection, and the complete file, once
// written, is delivered. A file that cannot be read (permissions, a
// sharing violation on Windows) is a rejection, retried with a growing
// backoff (up to 30s) because the cause may go away without an event.
type File struct {
	// Path is the plan file, e.g. C:\ProgramData\hnsplan\plan.json. Its
	// directory must exist when Run starts.
	Path string
	// Node is this node's name: a plan for another node is rejected.
	Node string
	// Debounce is how long the directory must be quiet before the file is
	// read. Zero means DefaultDebounce.
	Debounce time.Duration
	// Resync is how often the file is read with no event, in case an
	// event was missed (an overflowed queue, a network filesystem). Zero
	// means DefaultResync; negative disables it.
	Resync time.Duration
	// Trust, if set, requires the plan to be signed by one of its keys;
	// the signature is read from plan.SignatureFile(Path), which compile
	// --sign-key writes beside the plan.
	Trust *Trust
}

var _ Source = (*File)(nil)

// Run implements Source. It returns an error at once if the directory
// cannot be watched. If the directory is later removed, Run keeps going
// and watches it again on the next resync after it is back.
func (f *File) Run(ctx context.Context, updates chan<- Update) error {
	path := filepath.Clean(f.Path)
	dir := filepath.Dir(path)
	debounce := f.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	resync := f.Resync
	if resync == 0 {
		resync = DefaultResync
	}

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("planwatch: %s: watch: %w", path, err)
	}
	defer w.Close()
	// Watch before the first read, so a plan that lands in between is
	// seen by one or the other.
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("planwatch: %s: watch directory %s: %w", path, dir, err)
	}
	watching := true

	e := &emitter{node: f.Node, source: path, what: "the file", updates: updates, trust: f.Trust, sigName: plan.SignatureFile(path)}
	// timer fires debounce after the last event, or when a failed read is
	// due for a retry; stopped while idle.
	timer := time.NewTimer(debounce)
	timer.Stop()
	// backoff is the wait before retrying a read that failed (not for
	// absence: that is a state, not a failure); 0 after a good read.
	var backoff time.Duration
	read := func() error {
		failed, err := f.read(ctx, e, path)
		if err != nil || !failed {
			backoff = 0
			return err
		}
		backoff = min(max(2*backoff, debounce), maxBackoff)
		timer.Reset(backoff)
		return nil
	}
	if err := read(); err != nil {
		return err
	}

	var tick <-chan time.Time
	if resync > 0 {
		t := time.NewTicker(resync)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("planwatch: %s: the directory watcher closed", path)
			}
			if filepath.Clean(ev.Name) == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The directory itself went: its watch is gone with it.
				watching = false
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("planwatch: %s: the directory watcher closed", path)
			}
			// Most likely an overflowed event queue: events were lost, so
			// read as if there had been one. The error itself is not the
			// plan's fault and leaves no Update.
			_ = err
			timer.Reset(debounce)
		case <-timer.C:
			if err := read(); err != nil {
				return err
			}
		case <-f.Trust.changes():
			if err := read(); err != nil {
				return err
			}
		case <-tick:
			if !watching {
				// A directory that comes back is a new one; watch it again.
				watching = w.Add(dir) == nil
			}
			if err := read(); err != nil {
				return err
			}
		}
	}
}

// Read reads the file once and verifies it as Run does on each change:
// its signature (with Trust), the plan (format, node, digest), the parts
// it names from the files beside it, and its meaning (plan.Validate). The
// Update holds the plan, or Err saying why there is none (ErrAbsent when
// the file does not exist). It is `hnsplan-agent apply --once`'s way to
// the plan: the service's code, once.
func (f *File) Read(ctx context.Context) Update {
	path := filepath.Clean(f.Path)
	updates := make(chan Update, 1)
	e := &emitter{node: f.Node, source: path, what: "the file", updates: updates, trust: f.Trust, sigName: plan.SignatureFile(path)}
	if _, err := f.read(ctx, e, path); err != nil {
		return Update{Source: path, Err: &Error{Source: path, Msg: err.Error(), Err: err}}
	}
	select {
	case u := <-updates:
		return u
	default: // a fresh emitter sends every first read: not reached
		return Update{Source: path, Err: &Error{Source: path, Msg: "nothing was read", Err: ErrAbsent}}
	}
}

// maxBackoff caps the wait between retries of a read that keeps failing.
const maxBackoff = 30 * time.Second

// read reads and verifies the file and sends what it found. failed says
// the file could not be read. Its error is only ever ctx's.
func (f *File) read(ctx context.Context, e *emitter, path string) (failed bool, err error) {
	raw, err := plan.ReadFile(path, plan.MaxSize) // a FIFO or /dev/zero must not hang or fill the agent
	if errors.Is(err, fs.ErrNotExist) {
		why := "does not exist"
		if e.existed {
			why = "was removed"
		}
		return false, e.absent(ctx, why)
	}
	e.existed = true
	if err != nil {
		// Permissions, or a sharing violation on Windows while the file
		// is being replaced: a rejection, and a retry, since the latter
		// may pass without another event.
		return true, e.reject(ctx, nil, err, fmt.Sprintf("cannot read the file: %v", err))
	}
	sig, err := ReadSignatureFile(plan.SignatureFile(path))
	if err != nil {
		return true, e.reject(ctx, raw, err, fmt.Sprintf("cannot read the plan's signature: %v", err))
	}
	return false, e.data(ctx, raw, sig, dirParts(filepath.Dir(path)))
}

// dirParts reads a plan's parts from the plan's directory: part name's
// file plan.PartFileName(name) directly in it, a regular file (not a
// symlink: a part's name comes from the plan, and only files compile
// wrote beside it are read) of at most plan.MaxPartSize bytes; a route
// table head's signature beside it (plan.SignatureFile).
type dirParts string

func (d dirParts) path(name string) string { return filepath.Join(string(d), plan.PartFileName(name)) }

func (d dirParts) where(name string) string { return d.path(name) }

func (d dirParts) sigWhere(name string) string { return plan.SignatureFile(d.path(name)) }

// readPart reads name, whose CheckPartName the caller has checked, so the
// path stays in the directory.
func (d dirParts) readPart(name string) (data, sig []byte, err error) {
	path := d.path(name)
	if data, err = plan.ReadRegularFile(path, plan.MaxPartSize); err != nil {
		return nil, nil, err
	}
	sig, err = plan.ReadRegularFile(plan.SignatureFile(path), plan.MaxSignatureSize)
	if errors.Is(err, fs.ErrNotExist) {
		return data, nil, nil
	}
	if errors.Is(err, plan.ErrTooLarge) {
		return nil, nil, fmt.Errorf("%s is larger than %d bytes: not a signature", plan.SignatureFile(path), plan.MaxSignatureSize)
	}
	return data, sig, err
}

// ReadSignatureFile reads a detached signature file, nil if there is
// none; one that is not a regular file, or too large to be a signature,
// is an error, not read whole.
func ReadSignatureFile(path string) ([]byte, error) {
	sig, err := plan.ReadFile(path, plan.MaxSignatureSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, plan.ErrTooLarge) {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a signature", path, plan.MaxSignatureSize)
	}
	return sig, err
}
