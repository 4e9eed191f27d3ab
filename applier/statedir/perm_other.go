//go:build !unix && !windows

package statedir

import (
	"errors"
	"io/fs"
)

func createPrivate(string) error {
	return errors.New("private directories are not supported on this OS")
}

func checkPrivate(string, fs.FileInfo) error {
	return errors.New("cannot check who may write a directory on this OS")
}
