package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Normalize is ref as containerd and the kubelet name an image:
// "busybox:dractl" is "docker.io/library/busybox:dractl", a reference
// without a tag gets ":latest". The kubelet asks its runtime for the
// normalized name of a pod's image, so an image imported under any other
// name is not found. A digest reference is refused: a layout entry names
// a tag.
func Normalize(ref string) (string, error) {
	if strings.Contains(ref, "@") {
		return "", fmt.Errorf("image reference %q: a digest cannot name a layout entry, give a tag", ref)
	}
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	registry := tag.RegistryStr()
	repo := tag.RepositoryStr()
	// go-containerregistry names Docker Hub by its API host; containerd
	// and the kubelet by "docker.io".
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	return registry + "/" + repo + ":" + tag.TagStr(), nil
}

// Write writes img to w as an OCI image-layout tarball (oci-layout,
// index.json, blobs/sha256/...) whose one index entry is img for
// linux/amd64, annotated with ref normalized (AnnotationImageName, the
// name containerd imports it under) and its tag (AnnotationRefName).
// Entries are in a fixed order at Epoch: the same image and ref give the
// same bytes.
func Write(w io.Writer, ref string, img v1.Image) error {
	full, err := Normalize(ref)
	if err != nil {
		return err
	}
	tag := full[strings.LastIndex(full, ":")+1:]
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: OS, Architecture: Architecture},
			Annotations: map[string]string{AnnotationImageName: full, AnnotationRefName: tag},
		},
	})
	index, err := idx.RawManifest()
	if err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image manifest: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image configuration: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image layers: %w", err)
	}

	tw := tar.NewWriter(w)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX})
	}
	file := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	bytesFile := func(name string, data []byte) error {
		return file(name, int64(len(data)), bytes.NewReader(data))
	}
	blob := func(h v1.Hash, size int64, r io.Reader) error {
		return file("blobs/"+h.Algorithm+"/"+h.Hex, size, r)
	}
	if err := bytesFile("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	seen := map[v1.Hash]bool{}
	for i, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = blob(h, size, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	for _, raw := range [][]byte{config, manifest} {
		h, _, err := v1.SHA256(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		if err := blob(h, int64(len(raw)), bytes.NewReader(raw)); err != nil {
			return err
		}
	}
	if err := bytesFile("index.json", index); err != nil {
		return err
	}
	return tw.Close()
}

// WriteFile writes img as Write does to the file at path, creating its
// directory; the file is replaced only once it is whole.
func WriteFile(path, ref string, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, ref, img); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Unpack writes the image-layout tarball r into the directory dir and
// opens it with go-containerregistry's layout reader: what Write wrote,
// read back.
func Unpack(r io.Reader, dir string) (layout.Path, error) {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) {
			return "", fmt.Errorf("layout entry %q: not a path inside the layout", hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return "", err
			}
			f, err := os.Create(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("layout entry %q: type %q, want files and directories", hdr.Name, hdr.Typeflag)
		}
	}
	return layout.FromPath(dir)
}
