package imagebuild

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var meta = Meta{Version: "v0.1.0", Revision: "0123abcd", Source: "https://github.com/hnsplan/hnsplan",
	Created: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}

// fakePE is the smallest file debug/pe reads as a program for machine:
// a DOS header pointing at a PE signature and a file header, no sections.
func fakePE(machine uint16, pad string) []byte {
	b := make([]byte, 0x40+4+20+64) // debug/pe reads past the header
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	fh := b[0x44:]
	binary.LittleEndian.PutUint16(fh[0:], machine)
	binary.LittleEndian.PutUint16(fh[18:], 0x0022) // EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE
	return append(b, pad...)
}

// entry is a layer's tar entry as the tests read it.
type entry struct {
	hdr  *tar.Header
	data []byte
}

func layerEntries(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h, data})
	}
}

func images(t *testing.T, idx v1.ImageIndex) ([]v1.Descriptor, []v1.Image) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s", im.MediaType)
	}
	var imgs []v1.Image
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s", d.Digest, d.MediaType)
		}
		imgs = append(imgs, img)
	}
	return im.Manifests, imgs
}

func TestCLIIndex(t *testing.T) {
	bins := map[string][]byte{"amd64": []byte("\x7fELF amd64 hnsplan"), "arm64": []byte("\x7fELF arm64 hnsplan")}
	idx, err := CLIIndex(bins, meta)
	if err != nil {
		t.Fatal(err)
	}
	descs, imgs := images(t, idx)
	var platforms []string
	for i, img := range imgs {
		p := descs[i].Platform
		platforms = append(platforms, p.String())
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/hnsplan"}) || c.Cmd != nil || c.User != "65532:65532" {
			t.Errorf("%s: entrypoint %q cmd %q user %q", p, c.Entrypoint, c.Cmd, c.User)
		}
		for k, v := range map[string]string{"org.opencontainers.image.version": "v0.1.0",
			"org.opencontainers.image.revision": "0123abcd", "org.opencontainers.image.source": meta.Source} {
			if c.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", p, k, c.Labels[k], v)
			}
		}
		if !cf.Created.Time.Equal(meta.Created) {
			t.Errorf("%s: created %s", p, cf.Created)
		}
		ls, err := img.Layers()
		if err != nil || len(ls) != 1 {
			t.Fatalf("%s: %d layers, %v: want one, no base image", p, len(ls), err)
		}
		var names []string
		for _, e := range layerEntries(t, ls[0]) {
			h := e.hdr
			names = append(names, h.Name)
			if !h.ModTime.Equal(meta.Created) || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s %s: mtime %s, owner names %q %q", p, h.Name, h.ModTime, h.Uname, h.Gname)
			}
			switch h.Name {
			case CLIPath:
				if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || !bytes.Equal(e.data, bins[p.Architecture]) {
					t.Errorf("%s: %s mode %o owner %d:%d, %d bytes: want root's 0755, the %s binary", p, h.Name, h.Mode, h.Uid, h.Gid, len(e.data), p.Architecture)
				}
			case "home/nonroot/":
				if h.Uid != NonRootUID || h.Gid != NonRootUID || h.Mode != 0o700 {
					t.Errorf("%s: home %d:%d %o", p, h.Uid, h.Gid, h.Mode)
				}
			case "tmp/":
				if h.Mode != 0o1777 {
					t.Errorf("%s: /tmp mode %o", p, h.Mode)
				}
			case "etc/passwd":
				if !strings.Contains(string(e.data), "nonroot:x:65532:65532:") {
					t.Errorf("%s: passwd %q", p, e.data)
				}
			}
		}
		want := []string{"etc/", "etc/group", "etc/passwd", "home/", "home/nonroot/", "tmp/", "usr/", "usr/local/", "usr/local/bin/", CLIPath}
		if !slices.Equal(names, want) {
			t.Errorf("%s: layer entries %q, want %q", p, names, want)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %q", platforms)
	}
}

func TestAgentIndex(t *testing.T) {
	exe := fakePE(0x8664, "agent")
	idx, err := AgentIndex(exe, nil, WindowsBuilds, meta)
	if err != nil {
		t.Fatal(err)
	}
	descs, imgs := images(t, idx)
	var versions []string
	var layerDigests [][]v1.Hash
	for i, img := range imgs {
		p := descs[i].Platform
		versions = append(versions, p.OSVersion)
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if p.OS != "windows" || p.Architecture != "amd64" || cf.OS != "windows" || cf.Architecture != "amd64" || cf.OSVersion != p.OSVersion {
			t.Errorf("manifest %d: platform %+v, config %s/%s %s", i, p, cf.OS, cf.Architecture, cf.OSVersion)
		}
		c := cf.Config
		if !slices.Equal(c.Entrypoint, []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\hnsplan-agent.exe`}) || c.Cmd != nil || c.WorkingDir != "" || c.Env != nil {
			t.Errorf("%s: entrypoint %q cmd %q workdir %q env %q", p.OSVersion, c.Entrypoint, c.Cmd, c.WorkingDir, c.Env)
		}
		if len(cf.History) != 2 || !strings.Contains(cf.History[0].CreatedBy, "stand-in") || !strings.Contains(cf.History[1].CreatedBy, AgentExe) {
			t.Errorf("%s: history %+v", p.OSVersion, cf.History)
		}
		ls, err := img.Layers()
		if err != nil || len(ls) != 2 {
			t.Fatalf("%d layers, %v: want the base and the agent", len(ls), err)
		}
		var ds []v1.Hash
		for _, l := range ls {
			d, _ := l.Digest()
			ds = append(ds, d)
		}
		layerDigests = append(layerDigests, ds)
		if i > 0 {
			continue
		}
		checkBaseLayer(t, layerEntries(t, ls[0]))
		var names []string
		for _, e := range layerEntries(t, ls[1]) {
			names = append(names, e.hdr.Name)
			checkWindowsEntry(t, e)
			if e.hdr.Name == "Files/hnsplan-agent.exe" && !bytes.Equal(e.data, exe) {
				t.Errorf("the agent layer's exe is not the one given")
			}
		}
		if !slices.Equal(names, []string{"Files/", "Files/hnsplan-agent.exe", "Hives/"}) {
			t.Errorf("agent layer entries %q", names)
		}
	}
	if !slices.Equal(versions, []string{"10.0.17763", "10.0.20348", "10.0.26100"}) {
		t.Errorf("os.version %q", versions)
	}
	for _, ds := range layerDigests[1:] {
		if !slices.Equal(ds, layerDigests[0]) {
			t.Errorf("manifests do not share their layers: %v vs %v", ds, layerDigests[0])
		}
	}
}

func checkWindowsEntry(t *testing.T, e entry) {
	t.Helper()
	h := e.hdr
	if !strings.HasPrefix(h.Name, "Files/") && !strings.HasPrefix(h.Name, "Hives/") {
		t.Errorf("%s: a Windows layer's entries are under Files/ or Hives/", h.Name)
	}
	attr := "32"
	if h.Typeflag == tar.TypeDir {
		attr = "16"
	}
	if h.PAXRecords[paxFileAttr] != attr || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(meta.Created) {
		t.Errorf("%s: fileattr %q, owner %d:%d, mtime %s", h.Name, h.PAXRecords[paxFileAttr], h.Uid, h.Gid, h.ModTime)
	}
	sd, err := base64.StdEncoding.DecodeString(h.PAXRecords[paxRawSD])
	if err != nil || len(sd) < 20 || sd[0] != 1 || binary.LittleEndian.Uint16(sd[2:])&0x8004 != 0x8004 {
		t.Errorf("%s: security descriptor %x (%v): want a self-relative one with a DACL", h.Name, sd, err)
	}
}

func checkBaseLayer(t *testing.T, es []entry) {
	t.Helper()
	hives := 0
	var names []string
	for _, e := range es {
		names = append(names, e.hdr.Name)
		checkWindowsEntry(t, e)
		if dir, name := filepath.Split(e.hdr.Name); dir == "Files/Windows/System32/config/" && name != "" {
			info, err := CheckHive(e.data)
			if err != nil || info.Root != "TempEmpty_"+name {
				t.Errorf("hive %s: %+v, %v", name, info, err)
			}
			hives++
		}
	}
	if hives != 5 || !slices.Contains(names, "Files/License.txt") {
		t.Errorf("base layer %q: want License.txt and the five hives", names)
	}
}

func TestAgentIndexRefuses(t *testing.T) {
	for name, exe := range map[string][]byte{
		"not PE": []byte("\x7fELF"),
		"arm64":  fakePE(0xaa64, ""),
		"i386":   fakePE(0x14c, ""),
	} {
		if _, err := AgentIndex(exe, nil, WindowsBuilds, meta); err == nil {
			t.Errorf("%s: built an agent image", name)
		}
	}
}

func TestHive(t *testing.T) {
	h := Hive("TempEmpty_SYSTEM", `hnsplan\base\SYSTEM`, meta.Created)
	info, err := CheckHive(h)
	if err != nil || info.Root != "TempEmpty_SYSTEM" || info.Cells != 3 {
		t.Fatalf("%+v, %v: want the root key, its security cell and a free cell", info, err)
	}
	if !bytes.Equal(h, Hive("TempEmpty_SYSTEM", `hnsplan\base\SYSTEM`, meta.Created)) {
		t.Error("two hives of the same inputs differ")
	}
	for name, corrupt := range map[string]func(b []byte){
		"checksum":  func(b []byte) { b[100] ^= 1 },
		"signature": func(b []byte) { b[0] = 'x' },
		"bin":       func(b []byte) { b[regfBlock] = 'x' },
		"cell size": func(b []byte) { binary.LittleEndian.PutUint32(b[regfBlock+0x20:], 0xfffffff9) },
		"root cell": func(b []byte) { b[regfBlock+0x24] = 'x' },
		"sk link":   func(b []byte) { s := binary.LittleEndian.Uint32(b[regfBlock+0x20+4+44:]); b[regfBlock+int(s)+8]++ },
	} {
		b := bytes.Clone(h)
		corrupt(b)
		if _, err := CheckHive(b); err == nil {
			t.Errorf("%s corrupted: CheckHive accepts it", name)
		}
	}
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDeterministic(t *testing.T) {
	build := func(m Meta) (v1.Hash, v1.Hash) {
		cli, err := CLIIndex(map[string][]byte{"amd64": []byte("a"), "arm64": []byte("b")}, m)
		if err != nil {
			t.Fatal(err)
		}
		agent, err := AgentIndex(fakePE(0x8664, "x"), nil, WindowsBuilds, m)
		if err != nil {
			t.Fatal(err)
		}
		return digest(t, cli), digest(t, agent)
	}
	c1, a1 := build(meta)
	c2, a2 := build(meta)
	if c1 != c2 || a1 != a2 {
		t.Errorf("two builds: CLI %s, %s; agent %s, %s", c1, c2, a1, a2)
	}
	later := meta
	later.Created = meta.Created.Add(time.Second)
	if c3, a3 := build(later); c3 == c1 || a3 == a1 {
		t.Error("another timestamp gives the same digests: the timestamp is not in the images")
	}
	// Written twice, the layouts hold the same files.
	dir := t.TempDir()
	cli, _ := CLIIndex(map[string][]byte{"amd64": []byte("a")}, meta)
	for _, d := range []string{"one", "two"} {
		if err := WriteLayout(filepath.Join(dir, d), cli, "v0.1.0"); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"one", "two"} {
		p, err := layout.FromPath(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, _ := top.IndexManifest()
		if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest(t, cli) ||
			im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v0.1.0" {
			t.Errorf("%s/index.json: %+v", d, im.Manifests)
		}
	}
}

// TestAgentOnBase builds the agent on a stand-in for Microsoft's base image,
// given as an OCI layout and as a docker save tar: its layer comes first,
// unchanged, and the agent's config replaces the base's.
func TestAgentOnBase(t *testing.T) {
	tb, err := layerTar(withParents([]File{{Name: "Files/License.txt", Mode: 0o644, Data: []byte("stand-in")}}), meta.Created, true)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := ociLayer(tb)
	if err != nil {
		t.Fatal(err)
	}
	base, err := mutate.AppendLayers(empty.Image, bl)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := base.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "windows", "amd64"
	cf.Config.Cmd = []string{`c:\windows\system32\cmd.exe`}
	if base, err = mutate.ConfigFile(base, cf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(base, layout.WithPlatform(v1.Platform{OS: "windows", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	linux, _ := mutate.ConfigFile(base, &v1.ConfigFile{OS: "linux", Architecture: "amd64"})
	if err := lp.AppendImage(linux, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "base.tar")
	if err := tarball.WriteToFile(saved, nil, base); err != nil {
		t.Fatal(err)
	}
	wantDiff, _ := bl.DiffID()
	for _, src := range []string{filepath.Join(dir, "layout"), saved} {
		b, err := LoadBase(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		idx, err := AgentIndex(fakePE(0x8664, ""), b, WindowsBuilds[:1], meta)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, imgs := images(t, idx)
		cf, _ := imgs[0].ConfigFile()
		if len(cf.RootFS.DiffIDs) != 2 || cf.RootFS.DiffIDs[0] != wantDiff {
			t.Errorf("%s: diff IDs %v, want the base's %s first", src, cf.RootFS.DiffIDs, wantDiff)
		}
		if cf.Config.Cmd != nil || cf.Config.Entrypoint[0] != AgentEntrypoint {
			t.Errorf("%s: config %+v: the base's Cmd must not reach the agent", src, cf.Config)
		}
		m, _ := imgs[0].Manifest()
		for _, l := range m.Layers {
			if l.MediaType != types.OCILayer {
				t.Errorf("%s: layer media type %s", src, l.MediaType)
			}
		}
	}
	if _, err := LoadBase(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing base loads")
	}
	linuxOnly := filepath.Join(dir, "linux.tar")
	if err := tarball.WriteToFile(linuxOnly, nil, linux); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBase(linuxOnly); err == nil || !strings.Contains(err.Error(), "want windows/amd64") {
		t.Errorf("a linux base: %v", err)
	}
}
