package compiler

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// joinByCause joins the errors of writing many files (nil ones aside),
// saying each cause once: a full disk, a read-only file system or a
// directory without write permission fails every file alike, and one
// line per plan (237 of them, in a fault probe) buries what to do. Errors
// of one system error (fs.PathError's Err) become one, naming the first
// file and how many failed; the others are kept as they are, in order.
func joinByCause(errs []error) error {
	type group struct {
		first error
		cause error
		n     int
	}
	var groups []*group
	byCause := map[string]*group{}
	for _, err := range errs {
		if err == nil {
			continue
		}
		cause, key := err, ""
		var pe *fs.PathError
		if errors.As(err, &pe) {
			cause, key = pe.Err, pe.Err.Error()
		}
		if g := byCause[key]; key != "" && g != nil {
			g.n++
			continue
		}
		g := &group{first: err, cause: cause, n: 1}
		groups = append(groups, g)
		if key != "" {
			byCause[key] = g
		}
	}
	out := make([]error, 0, len(groups))
	for _, g := range groups {
		if g.n == 1 {
			out = append(out, g.first)
			continue
		}
		out = append(out, &manyFilesError{first: g.first, cause: g.cause, n: g.n})
	}
	return errors.Join(out...)
}

// A manyFilesError is one system error that failed n files.
type manyFilesError struct {
	first error // the first file's error, which wraps cause
	cause error
	n     int
}

func (e *manyFilesError) Error() string {
	msg := fmt.Sprintf("%d files could not be written: %v (the first: %v)", e.n, e.cause, e.first)
	if hint := writeHint(e.cause); hint != "" {
		msg += "; " + hint
	}
	return msg
}

func (e *manyFilesError) Unwrap() error { return e.first }

// writeHint is what to do about a write's system error, "" if nothing
// useful can be said.
func writeHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "the disk (or your quota) is full: free space on it, or write the plans elsewhere with -o"
	case errors.Is(err, syscall.EROFS):
		return "the file system is read-only: write the plans elsewhere with -o"
	case errors.Is(err, fs.ErrPermission):
		return "you may not write there: fix the directory's permissions, or write the plans elsewhere with -o"
	}
	return ""
}
