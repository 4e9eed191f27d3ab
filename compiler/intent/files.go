package intent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// DefaultMaxFileSize bounds each file the loader reads (Options.MaxFileSize).
// The CUE and YAML of the 1,000-node benchmark intent are far below it; an
// inventory of 50,000 pods is about 150 MiB and needs --max-file-size.
const DefaultMaxFileSize = 16 << 20

// An InputError says why a file of the intent was not read. It never holds
// the file's content.
type InputError struct {
	Path string // as the user would write it
	Why  string
}

func (e *InputError) Error() string { return e.Path + ": " + e.Why }

// inputFiles reads the files of one intent directory safely: only regular
// files that resolve inside the directory (a symlink may point within it,
// never out of it: not to /etc/passwd, /dev/zero or a FIFO), each of at
// most max bytes.
type inputFiles struct {
	abs  string // the directory, absolute
	root string // abs with symlinks resolved
	max  int64
	rel  func(string) string
}

func newInputFiles(dir string, max int64, rel func(string) string) (*inputFiles, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		max = DefaultMaxFileSize
	}
	return &inputFiles{abs: abs, root: root, max: max, rel: rel}, nil
}

// check returns an *InputError if path may not be read: it is not a
// regular file, resolves outside the directory, or is larger than the
// limit.
func (f *inputFiles) check(path string) error {
	fail := func(format string, args ...any) error {
		return &InputError{Path: f.rel(path), Why: fmt.Sprintf(format, args...)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fail("%v", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fail("%s", unresolvable(abs, err))
	}
	if r, err := filepath.Rel(f.root, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return fail("is a symlink that leads outside the intent directory; not read: an intent's files must be inside it (copy the file in)")
	}
	st, err := os.Stat(real)
	if err != nil {
		return fail("%v", cause(err))
	}
	if !st.Mode().IsRegular() {
		return fail("is not a regular file (%s); not read: an intent is made of regular files (replace it with one, or move it out of the intent directory)", fileKind(st.Mode()))
	}
	if st.Size() > f.max {
		return fail("is %d bytes, more than the limit of %d; not read (raise it with --max-file-size if the file is meant to be this large)", st.Size(), f.max)
	}
	// CUE's loader reads the .cue files itself and says nothing of why it
	// could not: find out here, where the reason can be given.
	file, err := os.Open(real)
	if err != nil {
		return fail("%s", unreadable(err))
	}
	file.Close()
	return nil
}

// unresolvable says why the path abs cannot be followed, and what to do:
// most often a symlink whose target is gone.
func unresolvable(abs string, err error) string {
	if target, lerr := os.Readlink(abs); lerr == nil && errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("is a symlink to %s, which does not exist; not read: point the link at a file inside the intent directory, or remove it", target)
	}
	if errors.Is(err, fs.ErrPermission) {
		return "cannot be resolved: permission denied on a directory of its path; give the user running hnsplan access to it, or move the file"
	}
	return fmt.Sprintf("cannot be resolved: %v; check the path (a symlink whose target is gone, a directory that moved)", cause(err))
}

// unreadable says why a file that exists cannot be opened, and what to do.
func unreadable(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return "cannot be read: permission denied; give the user running hnsplan read permission on it (chmod a+r), or move it out of the intent directory"
	}
	return fmt.Sprintf("cannot be read: %v; check the file, or move it out of the intent directory", cause(err))
}

// read reads path after check, never more than the limit (the file may
// grow between the two).
func (f *inputFiles) read(path string) ([]byte, error) {
	if err := f.check(path); err != nil {
		return nil, err
	}
	return readCapped(path, f.max)
}

// readCapped reads at most max bytes of the regular file path (following
// symlinks: the user named it), refusing anything else before opening it:
// a FIFO would block the open, a device never end.
func readCapped(path string, max int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &InputError{Path: path, Why: fmt.Sprintf("is not a regular file (%s); not read", fileKind(st.Mode()))}
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &InputError{Path: path, Why: fmt.Sprintf("is more than the limit of %d bytes; not read (raise it with --max-file-size if the file is meant to be this large)", max)}
	}
	return data, nil
}

// checkCUEFiles checks every .cue file below the directory before CUE's
// loader reads them (it reads files itself): one that check refuses is an
// error finding, and the CUE is not loaded. It reports whether all passed.
// Directories are walked as loadManifests walks them (not through
// symlinks).
func (f *inputFiles) checkCUEFiles(errs *diag.List) bool {
	ok := true
	_ = filepath.WalkDir(f.abs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // loadManifests reports unreadable directories
		}
		if d.IsDir() {
			if path != f.abs && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			// CUE would leave it out without a word, or find no package
			// at all: a file meant to be one, made a directory.
			if filepath.Dir(path) == f.abs && filepath.Ext(d.Name()) == ".cue" && !strings.HasPrefix(d.Name(), "_") {
				errs.Errorf(RuleLoad, diag.Pos{File: f.rel(path)}, "", "is a directory named like a CUE file; not read: CUE reads only files, so whatever it was meant to set is missing from the intent: make it a file, or rename the directory (without .cue)")
				ok = false
			}
			return nil
		}
		if filepath.Ext(d.Name()) != ".cue" {
			return nil
		}
		if err := f.check(path); err != nil {
			errs.Errorf(RuleLoad, diag.Pos{File: f.rel(path)}, "", "%s", err.(*InputError).Why)
			ok = false
		}
		return nil
	})
	return ok
}

// cause is the reason of a path error, without the path (the finding
// names the file already).
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileKind names what a file that is not a regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}
