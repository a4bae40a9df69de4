// Package ociimage builds container images from files, without a
// container engine, and writes them as OCI image-layout tarballs that
// containerd imports (`ctr -n k8s.io images import`) under a chosen
// reference.
//
// An image is one layer of the files a Spec lists, for linux/amd64, with
// every timestamp fixed at the Unix epoch, so that the same files and
// configuration always give the same digests: a rebuild that changes
// nothing changes no image, and a test can name what it built by digest.
//
// The layer, the configuration and the manifest are made by
// go-containerregistry (pkg/v1, mutate, tarball), as ko makes them; this
// package adds the file list, the fixed times and the layout tarball with
// the annotations containerd reads a name from.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the time of every file, the image's creation and its history:
// the images carry no build time, so equal inputs give equal digests.
var Epoch = time.Unix(0, 0).UTC()

// The platform of every image built here.
const (
	OS           = "linux"
	Architecture = "amd64"
)

// Annotations of an image's entry in the layout's index.json. containerd's
// import names the image after AnnotationImageName; AnnotationRefName is
// the OCI image-layout's own name of the entry, its tag.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// File is one entry of an image's filesystem: a regular file (Data, or
// the contents of the host file Source), a directory (Mode has
// fs.ModeDir) or a symbolic link (Link).
type File struct {
	// Path is where the entry is in the image: absolute and clean
	// ("/dractl"). Missing parent directories are added, 0755 and owned
	// by root.
	Path string
	// Data is a regular file's contents when Source is empty.
	Data []byte
	// Source is a host file whose contents (symbolic links followed) the
	// entry has.
	Source string
	// Link makes the entry a symbolic link to Link.
	Link string
	// Mode is the permission bits (and fs.ModeDir for a directory). Zero
	// means Source's permission bits for a host file, 0644 for Data and
	// 0755 for a directory.
	Mode fs.FileMode
	// UID and GID own the entry (root when zero).
	UID, GID int
}

// Spec is an image: its files and how its process starts.
type Spec struct {
	Files      []File
	Entrypoint []string
	Cmd        []string
	// Env is KEY=value entries.
	Env []string
	// User is "uid", "uid:gid" or a name from the image's /etc/passwd;
	// empty runs as root.
	User       string
	WorkingDir string
	Labels     map[string]string
}

// Build makes the image that spec describes: one layer of its files and
// a configuration for linux/amd64, created at Epoch.
func Build(spec Spec) (v1.Image, error) {
	layerTar, err := layerTar(spec.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: Architecture,
		OS:           OS,
		Created:      v1.Time{Time: Epoch},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: spec.Entrypoint,
			Cmd:        spec.Cmd,
			Env:        spec.Env,
			User:       spec.User,
			WorkingDir: spec.WorkingDir,
			Labels:     spec.Labels,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image configuration: %w", err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "ociimage.Build"},
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return img, nil
}

// entry is a File resolved: its tar header and contents.
type entry struct {
	hdr  tar.Header
	data []byte
}

// layerTar is the uncompressed layer of files: every entry and its
// parents, sorted by path (a parent before its children), at Epoch.
func layerTar(files []File) ([]byte, error) {
	// entries is keyed by the path in the image, without the leading
	// slash (and without a directory's trailing one).
	entries := map[string]*entry{}
	for i, f := range files {
		e, err := resolve(f)
		if err != nil {
			return nil, fmt.Errorf("file %d (%q): %w", i, f.Path, err)
		}
		key := strings.TrimPrefix(f.Path, "/")
		if old, ok := entries[key]; ok {
			if sameDir(old.hdr, e.hdr) {
				continue
			}
			return nil, fmt.Errorf("file %d (%q): the image already has an entry at that path", i, f.Path)
		}
		entries[key] = e
	}
	// Parents are added after every listed entry, so that a directory the
	// list names keeps its own mode wherever it comes in the list.
	for key := range entries {
		for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
			if p, ok := entries[dir]; ok {
				if p.hdr.Typeflag != tar.TypeDir {
					return nil, fmt.Errorf("%q: its parent /%s is not a directory in the image", "/"+key, dir)
				}
				continue
			}
			entries[dir] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}}
		}
	}
	keys := make([]string, 0, len(entries))
	for key := range entries {
		keys = append(keys, key)
	}
	// A path sorts before every path it is a prefix of: parents come first.
	sort.Strings(keys)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, key := range keys {
		e := entries[key]
		e.hdr.ModTime = Epoch
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("%q: %w", "/"+key, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("%q: %w", "/"+key, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sameDir is whether a and b are the same directory, which a list may
// name twice.
func sameDir(a, b tar.Header) bool {
	return a.Typeflag == tar.TypeDir && b.Typeflag == tar.TypeDir && a.Mode == b.Mode && a.Uid == b.Uid && a.Gid == b.Gid
}

// resolve checks f and reads its contents.
func resolve(f File) (*entry, error) {
	if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
		return nil, fmt.Errorf("the path must be absolute and clean, and not /")
	}
	name := strings.TrimPrefix(f.Path, "/")
	if f.Mode&^(fs.ModeDir|fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		return nil, fmt.Errorf("mode %v: only permission bits, setuid, setgid, sticky and fs.ModeDir are allowed", f.Mode)
	}
	kinds := 0
	for _, set := range []bool{f.Data != nil, f.Source != "", f.Link != "", f.Mode&fs.ModeDir != 0} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, fmt.Errorf("give one of Data, Source, Link or fs.ModeDir")
	}
	e := &entry{hdr: tar.Header{Name: name, Uid: f.UID, Gid: f.GID, Mode: int64(tarMode(f.Mode))}}
	switch {
	case f.Mode&fs.ModeDir != 0:
		e.hdr.Typeflag = tar.TypeDir
		e.hdr.Name += "/"
		if f.Mode.Perm() == 0 {
			e.hdr.Mode |= 0o755
		}
	case f.Link != "":
		e.hdr.Typeflag = tar.TypeSymlink
		e.hdr.Linkname = f.Link
		e.hdr.Mode = 0o777
	case f.Source != "":
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		if f.Mode == 0 {
			fi, err := os.Stat(f.Source)
			if err != nil {
				return nil, err
			}
			e.hdr.Mode = int64(tarMode(fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)))
		}
		e.hdr.Typeflag, e.hdr.Size, e.data = tar.TypeReg, int64(len(data)), data
	default:
		if f.Mode == 0 {
			e.hdr.Mode = 0o644
		}
		e.hdr.Typeflag, e.hdr.Size, e.data = tar.TypeReg, int64(len(f.Data)), f.Data
	}
	return e, nil
}

// tarMode is m's permission and special bits as a tar header holds them.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
