// Command images writes hnsplan's container images as OCI image layouts,
// without a container engine (`make images`): OUT/hnsplan, the CLI for
// linux/amd64 and linux/arm64, and OUT/hnsplan-agent, the agent's Windows
// HostProcess image, one manifest per Windows Server build. The binaries
// are `make release`'s, read from -release, so the images and the release
// archives carry the same bytes. internal/imagebuild does the work.
//
//	go run ./hack/images -release bin/images/release -out bin/images \
//	  -version v0.1.0 -revision $(git rev-parse HEAD) -epoch $(git log -1 --format=%ct)
//
// Push a layout with any OCI tool, e.g.
// `skopeo copy --all oci:bin/images/hnsplan-agent:v0.1.0 docker://REGISTRY/hnsplan-agent:v0.1.0`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/hnsplan/hnsplan/internal/imagebuild"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	release := fs.String("release", "bin/release", "directory of `make release`'s binaries (hnsplan-linux-amd64, hnsplan-agent-windows-amd64.exe, ...)")
	out := fs.String("out", "bin/images", "directory to write the two OCI image layouts to")
	version := fs.String("version", "", "the release's version: the layouts' tag and the images' org.opencontainers.image.version")
	revision := fs.String("revision", "", "the commit, org.opencontainers.image.revision")
	source := fs.String("source", "https://github.com/hnsplan/hnsplan", "org.opencontainers.image.source")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH; make images gives the commit's time)")
	agentBase := fs.String("agent-base", "", "build the agent on this base image (an OCI image layout directory or a docker save tar: Microsoft's HostProcess base image) instead of the generated stand-in")
	builds := fs.String("windows-builds", strings.Join(imagebuild.WindowsBuilds, ","), "os.version of each Windows manifest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *epoch == "" {
		return errors.New("no -epoch and no SOURCE_DATE_EPOCH: the images' timestamps must be fixed for the build to be reproducible")
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || sec < 0 {
		return fmt.Errorf("-epoch %q: want seconds since 1970", *epoch)
	}
	m := imagebuild.Meta{Version: *version, Revision: *revision, Source: *source, Created: time.Unix(sec, 0).UTC()}
	tag := *version
	if tag == "" {
		tag = "latest"
	}

	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(*release, name))
		if err != nil {
			return nil, fmt.Errorf("%w (make release writes it)", err)
		}
		return b, nil
	}
	bins := map[string][]byte{}
	for _, arch := range []string{"amd64", "arm64"} {
		if bins[arch], err = read("hnsplan-linux-" + arch); err != nil {
			return err
		}
	}
	cli, err := imagebuild.CLIIndex(bins, m)
	if err != nil {
		return err
	}
	if err := write(filepath.Join(*out, "hnsplan"), cli, tag); err != nil {
		return err
	}

	exe, err := read("hnsplan-agent-windows-amd64.exe")
	if err != nil {
		return err
	}
	var base v1.Image
	if *agentBase != "" {
		if base, err = imagebuild.LoadBase(*agentBase); err != nil {
			return err
		}
	}
	agent, err := imagebuild.AgentIndex(exe, base, strings.Split(*builds, ","), m)
	if err != nil {
		return err
	}
	return write(filepath.Join(*out, "hnsplan-agent"), agent, tag)
}

// write writes idx's layout and says what it holds: the index digest and,
// per platform, the manifest digest and the compressed size of its layers.
func write(dir string, idx v1.ImageIndex, tag string) error {
	if err := imagebuild.WriteLayout(dir, idx, tag); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s:%s %s\n", dir, tag, d)
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return err
		}
		mf, err := img.Manifest()
		if err != nil {
			return err
		}
		var size int64
		for _, l := range mf.Layers {
			size += l.Size
		}
		p := desc.Platform
		fmt.Printf("  %s/%s", p.OS, p.Architecture)
		if p.OSVersion != "" {
			fmt.Printf(" %s", p.OSVersion)
		}
		fmt.Printf(" %s %.1f MB in %d layers\n", desc.Digest, float64(size)/1e6, len(mf.Layers))
	}
	return nil
}
