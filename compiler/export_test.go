package compiler

import "os"

// SetCreateTemp replaces os.CreateTemp in plan writing until restore.
func SetCreateTemp(fn func(dir, pattern string) (*os.File, error)) (restore func()) {
	prev := createTemp
	createTemp = fn
	return func() { createTemp = prev }
}
