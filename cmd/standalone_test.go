package cmd_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// outsidePaths are the spellings of the reading-material folder that sits
// beside the checkout on the developers' machines. Built from parts so that
// this file does not name it itself.
var outsidePaths = []string{
	".." + "/shared",
	"/work" + "/shared",
}

// TestNoTrackedFileNamesOutsideFolder keeps the repository standing alone:
// a user clones it with nothing beside it, so no tracked file (code, test,
// script, Makefile, document, or symlink target) may name the folder that
// only the developers' machines have. Files the test needs belong under
// testdata/, scripts under hack/.
func TestNoTrackedFileNamesOutsideFolder(t *testing.T) {
	root := checkoutRoot(t)
	args := []string{"-C", root, "grep", "-n", "-F"}
	for _, p := range outsidePaths {
		args = append(args, "-e", p)
	}
	out, err := exec.Command("git", args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Errorf("tracked files name a folder outside the repository (%s); "+
			"copy what is needed into the repository (testdata/, hack/, docs/) and refer to that:\n%s",
			strings.Join(outsidePaths, ", "), out)
	case errors.As(err, &exit) && exit.ExitCode() == 1 && len(out) == 0:
		// git grep: no match.
	default:
		t.Fatalf("git grep in %s: %v\n%s", root, err, out)
	}

	// git grep reads a symlink's target only from the index, never from
	// the work tree, so the links are read here.
	staged, err := exec.Command("git", "-C", root, "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	for _, entry := range strings.Split(string(staged), "\x00") {
		// <mode> <object> <stage>\t<path>; 120000 is a symlink.
		meta, path, ok := strings.Cut(entry, "\t")
		if !ok || !strings.HasPrefix(meta, "120000 ") {
			continue
		}
		target, err := os.Readlink(filepath.Join(root, path))
		if err != nil {
			continue // deleted in the work tree: nothing to follow
		}
		if abs := filepath.Join(root, filepath.Dir(path), target); filepath.IsAbs(target) ||
			!strings.HasPrefix(abs, root+string(filepath.Separator)) {
			t.Errorf("%s is a symlink to %s, outside the repository; copy what it points to into the repository", path, target)
		}
	}
}

// checkoutRoot returns the top of the git checkout the test runs in. It
// skips the test outside a checkout (a module download or a tarball has no
// history to hold to the rule), and fails when there is a checkout but no
// git to read it with.
func checkoutRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		// .git is a directory in a clone and a file in a worktree.
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("not in a git checkout: no tracked files to check")
		}
		dir = parent
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("%s is a git checkout but git cannot read it (is git installed?): %v", dir, err)
	}
	return strings.TrimSpace(string(out))
}
