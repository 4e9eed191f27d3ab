package imagebuild

import (
	"errors"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// LoadBase reads the agent's base image from path: an OCI image layout
// directory (its windows/amd64 image, through nested indexes) or a
// `docker save` tar of one image. Use it to build on Microsoft's own
// HostProcess base image instead of StandInBase:
//
//	crane pull --format=oci mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0 base/
//	make images AGENT_BASE=base/
func LoadBase(path string) (v1.Image, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("agent base: %w", err)
	}
	var img v1.Image
	if st.IsDir() {
		idx, err := layout.ImageIndexFromPath(path)
		if err != nil {
			return nil, fmt.Errorf("agent base %s: not an OCI image layout: %w", path, err)
		}
		if img, err = windowsImage(idx, 0); err != nil {
			return nil, fmt.Errorf("agent base %s: %w", path, err)
		}
	} else if img, err = tarball.ImageFromPath(path, nil); err != nil {
		return nil, fmt.Errorf("agent base %s: not a docker save tar of one image: %w", path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("agent base %s: %w", path, err)
	}
	if cf.OS != "windows" || cf.Architecture != "amd64" {
		return nil, fmt.Errorf("agent base %s: a %s/%s image, want windows/amd64", path, cf.OS, cf.Architecture)
	}
	return img, nil
}

// windowsImage is idx's windows/amd64 image; several must agree (the
// HostProcess base image is one image for every Windows build).
func windowsImage(idx v1.ImageIndex, depth int) (v1.Image, error) {
	if depth > 4 {
		return nil, errors.New("indexes nested too deep")
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var found v1.Image
	for _, d := range im.Manifests {
		var img v1.Image
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			if img, err = windowsImage(child, depth+1); err != nil {
				continue
			}
		case d.MediaType.IsImage():
			if d.Platform != nil && (d.Platform.OS != "windows" || d.Platform.Architecture != "amd64") {
				continue
			}
			if img, err = idx.Image(d.Digest); err != nil {
				return nil, err
			}
		default:
			continue
		}
		if found != nil {
			a, _ := found.Digest()
			b, _ := img.Digest()
			if a != b {
				return nil, fmt.Errorf("more than one windows/amd64 image (%s, %s): give a layout of one", a, b)
			}
		}
		found = img
	}
	if found == nil {
		return nil, errors.New("no windows/amd64 image")
	}
	return found, nil
}

// baseLayers are base's layers, refused if any is foreign (a Windows OS
// layer that only Microsoft's registry may serve): a HostProcess base has
// none.
func baseLayers(base v1.Image) ([]v1.Layer, error) {
	ls, err := base.Layers()
	if err != nil {
		return nil, fmt.Errorf("agent base: %w", err)
	}
	for _, l := range ls {
		mt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		if !mt.IsLayer() || !mt.IsDistributable() {
			return nil, fmt.Errorf("agent base: layer of media type %s: a HostProcess base image has only plain layers", mt)
		}
	}
	if len(ls) == 0 {
		return nil, errors.New("agent base: no layers")
	}
	return ls, nil
}
