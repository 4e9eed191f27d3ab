package imagebuild

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file models how a Windows HostProcess container finds the program it
// starts, so that `make images` can refuse an agent image whose entrypoint
// would not be found on a node (or would be found on the host instead of in
// the image). The model follows hcsshim v0.15.0, the shim containerd runs
// Windows containers with (go.mod pins that version for applier/hns/hnswin):
//
//   - internal/cmd/cmd.go (Cmd.Start, escapeArgs): a process spec without a
//     CommandLine gets one from its Args, each quoted by windows.EscapeArg
//     and joined with spaces.
//   - internal/jobcontainers/jobcontainer.go (CreateProcess):
//     %CONTAINER_SANDBOX_MOUNT_POINT% and $env:CONTAINER_SANDBOX_MOUNT_POINT
//     in the command line and the working directory become the container's
//     rootfs location (replaceWithMountPoint); the working directory is the
//     rootfs location when the spec has none; PATH gets the rootfs location
//     and PowerShell's and WMI's directories appended; with the bind filter
//     the command line is prefixed with "cmd /c", because the shim, outside
//     the silo, cannot see the silo's bound files, and cmd.exe, inside it,
//     can. The shim then resolves the (prefixed) command line with
//     getApplicationName.
//   - internal/jobcontainers/storage.go: the rootfs location is C:\hpc\ with
//     the bind filter (bindSetup: the image's files bound there, per silo),
//     else C:\hpc\<container ID>\ (fallbackSetup: the layers mounted there,
//     visible to every process on the host); a bind-mode working directory
//     is taken as it is, a fallback one is joined under the rootfs location.
//   - internal/jobcontainers/path.go (getApplicationName, searchPathForExe):
//     SearchPathW over the working directory, then PATH, then the system
//     directories, ".exe" appended to a name without an extension; an
//     unquoted command line is tried one more space-separated word at a
//     time ("C:\Program Files\x" tries C:\Program.exe first).
//
// The command line itself is what containerd's CRI plugin makes of the
// image and the pod: the pod's command replaces the image's Entrypoint (and
// drops its Cmd), the pod's args replace Cmd; the working directory is the
// pod's workingDir, else the image's WorkingDir, else C:\, the default of
// containerd's Windows spec (pkg/oci populateDefaultWindowsSpec), which
// hcsshim then receives as a set working directory.
//
// The model is checked against that source by reading it, not by running
// it: there is no Windows machine here. Kubernetes' own HostProcess
// documentation gives the same two layouts (C:\hpc with bind mounts, a
// per-container path named by $CONTAINER_SANDBOX_MOUNT_POINT without).

// MountBehavior is how the node's containerd gives a HostProcess container
// its files: pod annotation microsoft.com/hostprocess-mount-behavior: bind
// on a host with the bind filter (Windows Server 2019 from its July 2022
// update, 2022 and later), or the older fallback (containerd 1.6, no bind
// filter).
type MountBehavior int

const (
	Bind MountBehavior = iota
	Fallback
)

func (b MountBehavior) String() string {
	if b == Bind {
		return "bind"
	}
	return "fallback"
}

// SandboxMountPoint is the variable hcsshim replaces with the container's
// rootfs location in a command line or working directory.
const SandboxMountPoint = "%CONTAINER_SANDBOX_MOUNT_POINT%"

// HostProcess is a HostProcess container as the node starts it: what the
// image and the pod say, and what files exist.
type HostProcess struct {
	// The image's config.
	Entrypoint, Cmd []string
	WorkingDir      string
	Env             []string
	// The pod's container; nil means not set (an empty, non-nil Command is
	// set and empty, as Kubernetes has it).
	Command, Args []string
	PodWorkingDir string

	Behavior MountBehavior
	// ImageFiles are the image's files, relative to its root, with
	// backslashes or slashes ("hnsplan-agent.exe", "bin/x.exe").
	ImageFiles []string
	// HostFiles are absolute paths of files on the host (C:\Windows\System32\cmd.exe).
	HostFiles []string
	// HostPath is the host's PATH for the container's user, in order.
	HostPath []string
	// ContainerID names the fallback rootfs location (C:\hpc\<ID>\).
	ContainerID string
}

// Resolution is where the program of a HostProcess container was found.
type Resolution struct {
	// Exe is the absolute path started, as the container's process sees it.
	Exe string
	// InImage says Exe is a file of the image, not of the host.
	InImage bool
	// CommandLine is the command line after hcsshim's rewriting
	// ("cmd /c ..." in bind mode).
	CommandLine string
	// WorkDir is the process's working directory.
	WorkDir string
}

// DefaultHost is a Windows host with nothing on it but Windows: cmd.exe and
// the system PATH of a Windows Server install.
func DefaultHost() (files, path []string) {
	return []string{`C:\Windows\System32\cmd.exe`},
		[]string{`C:\Windows\system32`, `C:\Windows`, `C:\Windows\System32\Wbem`, `C:\Windows\System32\WindowsPowerShell\v1.0\`}
}

// ResolveHostProcess says which program a HostProcess container starts, or
// why none is found.
func ResolveHostProcess(c HostProcess) (Resolution, error) {
	for _, e := range c.Env {
		if k, _, _ := strings.Cut(e, "="); strings.EqualFold(k, "PATH") {
			// hcsshim appends the image's environment after the user's
			// default block, giving the process two PATHs; which one a
			// program sees is not modelled here.
			return Resolution{}, errors.New("the image sets PATH: its effect beside the host's PATH is not modelled; leave PATH unset")
		}
	}
	args := c.Entrypoint
	if c.Command != nil {
		args = c.Command
	}
	switch {
	case c.Args != nil:
		args = append(slices.Clone(args), c.Args...)
	case c.Command == nil:
		args = append(slices.Clone(args), c.Cmd...)
	}
	if len(args) == 0 {
		return Resolution{}, errors.New("no command: the image has no Entrypoint or Cmd and the pod sets no command")
	}
	cwd := `C:\`
	if c.WorkingDir != "" {
		cwd = c.WorkingDir
	}
	if c.PodWorkingDir != "" {
		cwd = c.PodWorkingDir
	}

	root := `C:\hpc\`
	if c.Behavior == Fallback {
		id := c.ContainerID
		if id == "" {
			id = "0123456789abcdef"
		}
		root = `C:\hpc\` + id + `\`
	}
	fs := newFileView(c, root)
	replace := func(s string) (string, bool) {
		n := strings.ReplaceAll(s, SandboxMountPoint, root[:len(root)-1])
		n = strings.ReplaceAll(n, "$env:CONTAINER_SANDBOX_MOUNT_POINT", root[:len(root)-1])
		return n, n != s
	}
	workDir, changed := replace(cwd)
	if !changed && c.Behavior == Fallback {
		workDir = joinWin(root, removeDriveLetter(workDir))
	}
	path := append(slices.Clone(c.HostPath), strings.TrimSuffix(root, `\`), `C:\WINDOWS\System32\WindowsPowerShell\v1.0\`, `C:\WINDOWS\System32\Wbem`)

	cmdLine, _ := replace(escapeArgs(args))
	res := Resolution{WorkDir: workDir}
	if c.Behavior == Bind {
		// The shim starts cmd.exe (found from its own view of the host),
		// which resolves the rest inside the silo, where the image is at
		// C:\hpc\ and cmd searches the working directory, then PATH.
		cmdLine = "cmd /c " + cmdLine
		if _, err := getApplicationName(fs.host, cmdLine, workDir, path); err != nil {
			return res, err
		}
		res.CommandLine = cmdLine
		exe, err := cmdSearch(fs.silo, strings.TrimPrefix(cmdLine, "cmd /c "), workDir, path)
		if err != nil {
			return res, err
		}
		res.Exe, res.InImage = exe, fs.inImage(exe)
		return res, nil
	}
	exe, err := getApplicationName(fs.silo, cmdLine, workDir, path)
	if err != nil {
		return res, err
	}
	res.CommandLine, res.Exe, res.InImage = cmdLine, exe, fs.inImage(exe)
	return res, nil
}

// CheckHostProcess refuses a HostProcess container (c's image and pod, its
// Behavior, host and files ignored) that does not start the image's own
// program under both mount behaviours, on a clean host and on a host that
// has a file of the program's name in its root and in every PATH directory
// (a copy installed as a Windows service, say). want is the image file the
// container must start ("hnsplan-agent.exe").
func CheckHostProcess(c HostProcess, want string) error {
	files, path := DefaultHost()
	base := filepathBase(want)
	hostile := slices.Clone(files)
	for _, d := range append([]string{`C:\`}, path...) {
		hostile = append(hostile, joinWin(d, base))
	}
	var errs []error
	for _, b := range []MountBehavior{Bind, Fallback} {
		for _, host := range [][]string{files, hostile} {
			c.Behavior, c.HostFiles, c.HostPath = b, host, path
			r, err := ResolveHostProcess(c)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s mounts: %w", b, err))
			case !r.InImage:
				errs = append(errs, fmt.Errorf("%s mounts, with %s on the host: %q starts the host's %s, not the image's", b, base, r.CommandLine, r.Exe))
			case !strings.EqualFold(r.Exe, joinWin(imageRoot(b, c.ContainerID), want)):
				errs = append(errs, fmt.Errorf("%s mounts: %q starts the image's %s, not %s", b, r.CommandLine, r.Exe, want))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the HostProcess entrypoint does not reliably start the image's %s (use %s\\%s): %w", want, SandboxMountPoint, want, errors.Join(dedupe(errs)...))
	}
	return nil
}

func imageRoot(b MountBehavior, id string) string {
	if b == Bind {
		return `C:\hpc\`
	}
	if id == "" {
		id = "0123456789abcdef"
	}
	return `C:\hpc\` + id + `\`
}

func dedupe(errs []error) []error {
	seen := map[string]bool{}
	var out []error
	for _, e := range errs {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return out
}

// fileView is the file system as seen from the shim (host: the image only
// where fallback mode mounted it) and from inside the container (silo).
type fileView struct {
	host, silo map[string]bool
	image      map[string]bool
}

func newFileView(c HostProcess, root string) fileView {
	v := fileView{host: map[string]bool{}, silo: map[string]bool{}, image: map[string]bool{}}
	for _, f := range c.HostFiles {
		f = strings.ToLower(f)
		v.host[f] = true
		// With bind mounts the silo's C:\hpc\ is the image: whatever
		// the host has there is hidden.
		if c.Behavior == Fallback || !strings.HasPrefix(f, `c:\hpc\`) {
			v.silo[f] = true
		}
	}
	for _, f := range c.ImageFiles {
		p := strings.ToLower(joinWin(root, f))
		v.image[p] = true
		v.silo[p] = true
		if c.Behavior == Fallback {
			v.host[p] = true // mounted on the host, visible to the shim
		}
	}
	return v
}

func (v fileView) inImage(p string) bool { return v.image[strings.ToLower(p)] }

// getApplicationName is hcsshim's (path.go): the application of an
// unquoted command line is its first word, else its first two, and so on.
func getApplicationName(fs map[string]bool, cmdLine, workDir string, path []string) (string, error) {
	dirs := []string{}
	if workDir != "" {
		dirs = append(dirs, workDir)
	}
	dirs = append(dirs, path...)
	dirs = append(dirs, `C:\Windows\system32`, `C:\Windows\System`, `C:\Windows`)
	if strings.HasPrefix(cmdLine, `"`) {
		end := strings.Index(cmdLine[1:], `"`)
		if end < 0 {
			return "", errors.New("no ending quotation mark found in command")
		}
		return searchPath(fs, cmdLine[1:end+1], dirs, []string{".exe"})
	}
	words := splitArgs(cmdLine)
	trial := ""
	for _, w := range words {
		trial += w
		if p, err := searchPath(fs, trial, dirs, []string{".exe"}); err == nil {
			return p, nil
		}
		trial += " "
	}
	return "", fmt.Errorf("failed to find executable %q (searched %s)", cmdLine, strings.Join(dirs, ";"))
}

// cmdSearch is how cmd.exe finds the program of "cmd /c LINE": a path as
// given (relative to the working directory), a bare name in the working
// directory and then each PATH directory, trying PATHEXT's extensions when
// the name has none.
func cmdSearch(fs map[string]bool, line, workDir string, path []string) (string, error) {
	words := splitArgs(line)
	if len(words) == 0 {
		return "", errors.New("cmd /c with nothing to run")
	}
	name := strings.Trim(words[0], `"`)
	exts := []string{".com", ".exe", ".bat", ".cmd"}
	var dirs []string
	switch {
	case isAbs(name):
		dirs = []string{""}
	case strings.ContainsAny(name, `\/`):
		dirs = []string{workDir}
	default:
		dirs = append([]string{workDir}, path...)
	}
	p, err := searchPath(fs, name, dirs, exts)
	if err != nil {
		return "", fmt.Errorf("cmd.exe in the container: %q is not recognized as a program (looked in %s)", name, strings.Join(dirs, ";"))
	}
	return p, nil
}

// searchPath is SearchPathW's rule as the callers use it: an absolute name
// is looked at directly, any other in each directory in turn; a name
// without an extension gets each of exts.
func searchPath(fs map[string]bool, name string, dirs, exts []string) (string, error) {
	cands := []string{name}
	if !strings.Contains(filepathBase(name), ".") {
		cands = nil
		for _, e := range exts {
			cands = append(cands, name+e)
		}
	}
	if isAbs(name) {
		dirs = []string{""}
	}
	for _, d := range dirs {
		for _, n := range cands {
			p := n
			if d != "" {
				p = joinWin(d, n)
			}
			if fs[strings.ToLower(p)] {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func isAbs(p string) bool {
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') || strings.HasPrefix(p, `\\`)
}

func removeDriveLetter(p string) string {
	if len(p) == 2 && p[1] == ':' {
		return `\`
	}
	if len(p) > 2 && p[1] == ':' {
		return p[2:]
	}
	return p
}

// joinWin joins Windows path elements with single backslashes, folding "."
// and ".." as filepath.Join does on Windows.
func joinWin(elem ...string) string {
	var parts []string
	drive := ""
	for i, e := range elem {
		e = strings.ReplaceAll(e, "/", `\`)
		if i == 0 && len(e) >= 2 && e[1] == ':' {
			drive, e = e[:2], e[2:]
		}
		for _, s := range strings.Split(e, `\`) {
			switch s {
			case "", ".":
			case "..":
				if len(parts) > 0 {
					parts = parts[:len(parts)-1]
				}
			default:
				parts = append(parts, s)
			}
		}
	}
	return drive + `\` + strings.Join(parts, `\`)
}

func filepathBase(p string) string {
	p = strings.ReplaceAll(p, "/", `\`)
	return p[strings.LastIndex(p, `\`)+1:]
}

// splitArgs splits a command line at unquoted spaces, keeping quotes, as
// hcsshim's splitArgs (path.go) does for the search.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// escapeArgs is hcsshim's (internal/cmd/cmd.go): each argument quoted as
// golang.org/x/sys/windows.EscapeArg quotes it, joined by spaces.
func escapeArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = escapeArg(a)
	}
	return strings.Join(out, " ")
}

func escapeArg(s string) string {
	if s == "" {
		return `""`
	}
	quote := strings.ContainsAny(s, " \t")
	var b strings.Builder
	if quote {
		b.WriteByte('"')
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			slashes++
		case '"':
			for ; slashes > 0; slashes-- {
				b.WriteByte('\\')
			}
			b.WriteByte('\\')
		default:
			slashes = 0
		}
		b.WriteByte(s[i])
	}
	if quote {
		for ; slashes > 0; slashes-- {
			b.WriteByte('\\')
		}
		b.WriteByte('"')
	}
	return b.String()
}
