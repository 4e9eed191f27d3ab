package imagebuild

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer.
type File struct {
	Name     string // slash-separated, relative; a directory's without the trailing slash
	Dir      bool
	Mode     int64 // permission bits (and setuid etc.)
	UID, GID int
	Data     []byte
}

// Windows PAX records, as hcsshim's backuptar reads them
// (pkg/ociwclayer, internal/wclayer/backuptar).
const (
	paxFileAttr     = "MSWINDOWS.fileattr"
	paxRawSD        = "MSWINDOWS.rawsd"
	paxCreationTime = "LIBARCHIVE.creationtime"
	fileAttrDir     = 0x10 // FILE_ATTRIBUTE_DIRECTORY
	fileAttrArchive = 0x20 // FILE_ATTRIBUTE_ARCHIVE
)

// layerTar writes files as a tar in name order (a directory before what
// it holds), every time stamp t, no user or group names: the same files
// give the same bytes. With windows set, each entry carries the Windows
// attributes and security descriptor a Windows layer has.
func layerTar(files []File, t time.Time, windows bool) ([]byte, error) {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	t = t.UTC().Truncate(time.Second)
	for i, f := range files {
		if i > 0 && files[i-1].Name == f.Name {
			return nil, fmt.Errorf("layer: %s twice", f.Name)
		}
		if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || strings.HasPrefix(f.Name, "../") {
			return nil, fmt.Errorf("layer: bad name %q", f.Name)
		}
		h := &tar.Header{
			Name: f.Name, Mode: f.Mode, Uid: f.UID, Gid: f.GID,
			ModTime: t, Format: tar.FormatPAX,
		}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, f.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if windows {
			attr, sd := fileAttrArchive, fileSD()
			if f.Dir {
				attr, sd = fileAttrDir, dirSD()
			}
			h.PAXRecords = map[string]string{
				paxFileAttr:     strconv.Itoa(attr),
				paxRawSD:        base64.StdEncoding.EncodeToString(sd),
				paxCreationTime: strconv.FormatInt(t.Unix(), 10),
			}
		} else {
			h.Format = tar.FormatUSTAR
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ociLayer is a gzip-compressed OCI layer of an uncompressed tar.
func ociLayer(tarBytes []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// withParents adds the directories that hold files (mode 0755, root's),
// unless files list them.
func withParents(files []File) []File {
	have := map[string]bool{}
	for _, f := range files {
		have[f.Name] = true
	}
	out := append([]File(nil), files...)
	for _, f := range files {
		for d := path.Dir(f.Name); d != "." && !have[d]; d = path.Dir(d) {
			have[d] = true
			out = append(out, File{Name: d, Dir: true, Mode: 0o755})
		}
	}
	return out
}
