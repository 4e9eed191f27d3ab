// Package imagebuild builds hnsplan's container images without a container
// engine: the CLI as a Linux image (linux/amd64, linux/arm64) and the agent
// as a Windows HostProcess image (windows/amd64, one manifest per Windows
// Server build), each an OCI image index written as an OCI image layout.
//
// It uses go-containerregistry, a build tool's dependency only:
// cmd/deps_test.go keeps it out of the shipped binaries. Everything it
// writes is a function of its inputs (binaries, version, revision, time):
// entries sorted, one timestamp, fixed owners and modes, so two builds give
// the same digests.
package imagebuild

import (
	"bytes"
	"debug/pe"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Meta is what every image says of itself, as OCI labels.
type Meta struct {
	Version  string    // org.opencontainers.image.version
	Revision string    // org.opencontainers.image.revision: the commit
	Source   string    // org.opencontainers.image.source
	Created  time.Time // the build's one timestamp (SOURCE_DATE_EPOCH)
}

func (m Meta) labels(title, description string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.created":     m.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.source":   m.Source,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// The CLI image.
const (
	CLIPath    = "usr/local/bin/hnsplan"
	NonRootUID = 65532 // distroless's "nonroot"
)

// CLIImage is the CLI for one Linux platform: the static binary at
// /usr/local/bin/hnsplan, /etc/passwd and /etc/group naming root and
// nonroot, nonroot's home and /tmp, on no base image; it runs as 65532.
func CLIImage(bin []byte, arch string, m Meta) (v1.Image, error) {
	uid := NonRootUID
	files := withParents([]File{
		{Name: CLIPath, Mode: 0o755, Data: bin},
		{Name: "etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)},
		{Name: "etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", uid)},
		{Name: "home/nonroot", Dir: true, Mode: 0o700, UID: uid, GID: uid},
		{Name: "tmp", Dir: true, Mode: 0o1777},
	})
	tb, err := layerTar(files, m.Created, false)
	if err != nil {
		return nil, err
	}
	l, err := ociLayer(tb)
	if err != nil {
		return nil, err
	}
	cfg := v1.Config{
		Entrypoint: []string{"/" + CLIPath},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
		WorkingDir: "/home/nonroot",
		Labels:     m.labels("hnsplan", "hnsplan, the CLI: vet, compile, plan, diff, explain, publish, rollout"),
	}
	return image(empty.Image, []v1.Layer{l}, []string{"hnsplan-linux-" + arch + " as /" + CLIPath + ", user nonroot"},
		v1.Platform{OS: "linux", Architecture: arch}, cfg, m)
}

// CLIIndex is the CLI image for each linux architecture of bins.
func CLIIndex(bins map[string][]byte, m Meta) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, arch := range slices.Sorted(maps.Keys(bins)) {
		img, err := CLIImage(bins[arch], arch, m)
		if err != nil {
			return nil, fmt.Errorf("hnsplan linux/%s: %w", arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return index(adds), nil
}

// The agent image.
const (
	AgentExe = "hnsplan-agent.exe"
	// AgentEntrypoint names the image's own copy of the agent by the
	// variable hcsshim replaces with where the image's files are: a bare
	// name would be searched for in C:\ and the host's PATH before them
	// (see CheckHostProcess).
	AgentEntrypoint = SandboxMountPoint + `\` + AgentExe
)

// WindowsBuilds are the os.version of each manifest of the agent's index:
// Windows Server 2019 (17763), 2022 (20348) and 2025 (26100), the versions
// Kubernetes runs Windows nodes on and vet's windows-build rules know.
// containerd compares major.minor.build only (containerd/platforms:
// platform_windows_compat.go, getWindowsOSVersion; older releases by
// prefix), so the update revision is left out: the image is the same for
// every update of a build.
var WindowsBuilds = []string{"10.0.17763", "10.0.20348", "10.0.26100"}

// AgentConfig is the agent image's config: the entrypoint, no command,
// working directory or environment (the DaemonSet gives run and its flags
// as args).
func AgentConfig(m Meta) v1.Config {
	return v1.Config{
		Entrypoint: []string{AgentEntrypoint},
		Labels:     m.labels("hnsplan-agent", "hnsplan-agent for a HostProcess DaemonSet (deploy/daemonset.yaml)"),
	}
}

// AgentIndex is the agent's HostProcess image for each of osVersions: the
// agent executable at the image's root, on base (nil: the base layer
// StandInBase makes). It refuses an executable that is not a Windows amd64
// program, and an entrypoint CheckHostProcess refuses.
func AgentIndex(exe []byte, base v1.Image, osVersions []string, m Meta) (v1.ImageIndex, error) {
	if err := checkPE(exe); err != nil {
		return nil, fmt.Errorf("%s: %w", AgentExe, err)
	}
	cfg := AgentConfig(m)
	if err := CheckHostProcess(HostProcess{Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: cfg.WorkingDir,
		Env: cfg.Env, Args: []string{"run"}, ImageFiles: []string{AgentExe}}, AgentExe); err != nil {
		return nil, err
	}
	var layers []v1.Layer
	var history []string
	if base == nil {
		l, err := StandInBase(m.Created)
		if err != nil {
			return nil, err
		}
		layers, history = append(layers, l), append(history, "base: hack/images' stand-in for the HostProcess base image")
	} else {
		bl, err := baseLayers(base)
		if err != nil {
			return nil, err
		}
		layers = append(layers, bl...)
		for range bl {
			history = append(history, "base: AGENT_BASE")
		}
	}
	tb, err := layerTar([]File{
		{Name: "Files", Dir: true, Mode: 0o755},
		{Name: "Files/" + AgentExe, Mode: 0o755, Data: exe},
		{Name: "Hives", Dir: true, Mode: 0o755},
	}, m.Created, true)
	if err != nil {
		return nil, err
	}
	l, err := ociLayer(tb)
	if err != nil {
		return nil, err
	}
	layers, history = append(layers, l), append(history, "hnsplan-agent-windows-amd64.exe as "+AgentExe)
	var adds []mutate.IndexAddendum
	for _, osv := range osVersions {
		p := v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: osv}
		img, err := image(empty.Image, layers, history, p, cfg, m)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return index(adds), nil
}

// StandInBase is a layer of the shape of Microsoft's HostProcess base image
// (mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image,
// built by New-HostProcessBaseImage.ps1): Files\License.txt and the five
// registry hives of Files\Windows\System32\config, empty valid hives, which
// containerd's base-layer import requires. It holds no Microsoft file.
func StandInBase(t time.Time) (v1.Layer, error) {
	files := []File{{Name: "Files/License.txt", Mode: 0o644, Data: []byte(standInLicense)}}
	for _, h := range []string{"DEFAULT", "SAM", "SECURITY", "SOFTWARE", "SYSTEM"} {
		files = append(files, File{Name: "Files/Windows/System32/config/" + h, Mode: 0o644,
			Data: Hive("TempEmpty_"+h, `hnsplan\base\`+h, t)})
	}
	tb, err := layerTar(withParents(files), t, true)
	if err != nil {
		return nil, err
	}
	return ociLayer(tb)
}

const standInLicense = `This layer is the base of hnsplan-agent's HostProcess image, generated by
hnsplan's hack/images (internal/imagebuild): it has the shape of Microsoft's
HostProcess base image (Files\License.txt and empty registry hives under
Files\Windows\System32\config) and holds no file of Microsoft's.
A HostProcess container runs on the host and uses the host's Windows, so its
base needs no operating system files.
SPDX-License-Identifier: Apache-2.0
`

// image is from with layers appended and cfg, platform and created set.
// history says, per layer, what made it.
func image(from v1.Image, layers []v1.Layer, history []string, p v1.Platform, cfg v1.Config, m Meta) (v1.Image, error) {
	if len(history) != len(layers) {
		return nil, fmt.Errorf("%d layers, %d history entries", len(layers), len(history))
	}
	img := mutate.MediaType(from, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: history[i], Comment: "hack/images"}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.OSVersion, cf.Variant = p.Architecture, p.OS, p.OSVersion, p.Variant
	cf.Created = v1.Time{Time: m.Created}
	cf.Author = ""
	cf.Container, cf.DockerVersion = "", ""
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

func index(adds []mutate.IndexAddendum) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...)
}

// WriteLayout writes idx as an OCI image layout in dir (replacing what is
// there): index.json names idx, tagged ref (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	return p.AppendIndex(idx, opts...)
}

// checkPE refuses what is not a Windows amd64 executable.
func checkPE(b []byte) error {
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a Windows executable: %w", err)
	}
	defer f.Close()
	if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
		return fmt.Errorf("a Windows executable for machine %#x, not amd64", f.Machine)
	}
	if f.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 || f.Characteristics&pe.IMAGE_FILE_DLL != 0 {
		return fmt.Errorf("not an executable image (characteristics %#x)", f.Characteristics)
	}
	return nil
}

// IsAMD64PE says whether b is a Windows amd64 executable.
func IsAMD64PE(b []byte) error { return checkPE(b) }
