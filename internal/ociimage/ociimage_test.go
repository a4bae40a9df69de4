package ociimage_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dractl/dractl/internal/ociimage"
)

// readLayout unpacks an image-layout tarball, checking that every
// entry is at the epoch, and opens it with go-containerregistry's layout
// reader.
func readLayout(t *testing.T, tarball []byte) layout.Path {
	t.Helper()
	for _, hdr := range headers(t, tarball) {
		if !hdr.ModTime.Equal(ociimage.Epoch) {
			t.Errorf("layout entry %s: time %v, want %v", hdr.Name, hdr.ModTime, ociimage.Epoch)
		}
	}
	lp, err := ociimage.Unpack(bytes.NewReader(tarball), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return lp
}

// headers lists a tarball's entries.
func headers(t *testing.T, tarball []byte) []*tar.Header {
	t.Helper()
	var hdrs []*tar.Header
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
	}
}

// layerFile is what an image's filesystem holds at one path.
type layerFile struct {
	Type     byte
	Mode     int64
	UID, GID int
	Link     string
	Data     string
}

// files reads every entry of img's layers, by path.
func files(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]layerFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !hdr.ModTime.Equal(ociimage.Epoch) {
				t.Errorf("%s: time %v, want %v", hdr.Name, hdr.ModTime, ociimage.Epoch)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[hdr.Name] = layerFile{Type: hdr.Typeflag, Mode: hdr.Mode, UID: hdr.Uid, GID: hdr.Gid, Link: hdr.Linkname, Data: string(data)}
		}
		rc.Close()
	}
	return out
}

func build(t *testing.T, spec ociimage.Spec, ref string) []byte {
	t.Helper()
	img, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ociimage.Write(&buf, ref, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBuildAndWrite(t *testing.T) {
	host := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(host, []byte("#!/bin/sh\necho tool\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	spec := ociimage.Spec{
		Files: []ociimage.File{
			{Path: "/bin/busybox", Data: []byte("ELF"), Mode: 0o755},
			{Path: "/bin/sh", Link: "busybox"},
			{Path: "/usr/local/bin/tool", Source: host},
			{Path: "/etc/motd", Data: []byte("hello\n")},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
			{Path: "/home/nonroot", Mode: fs.ModeDir | 0o700, UID: 65532, GID: 65532},
		},
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
		Env:        []string{"PATH=/bin:/usr/local/bin"},
		User:       "65532:65532",
		WorkingDir: "/home/nonroot",
		Labels:     map[string]string{"org.opencontainers.image.source": "dractl"},
	}
	tarball := build(t, spec, "busybox:dractl")
	lp := readLayout(t, tarball)

	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %q, want %q", im.MediaType, types.OCIImageIndex)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if want := map[string]string{
		ociimage.AnnotationImageName: "docker.io/library/busybox:dractl",
		ociimage.AnnotationRefName:   "dractl",
	}; !cmp.Equal(desc.Annotations, want) {
		t.Errorf("index entry annotations %v, want %v", desc.Annotations, want)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index entry platform %+v, want linux/amd64", desc.Platform)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("index entry media type %q, want %q", desc.MediaType, types.OCIManifestSchema1)
	}

	img, err := lp.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.Config.MediaType != types.OCIConfigJSON || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest config %q, layers %+v: want an OCI config and one OCI layer", manifest.Config.MediaType, manifest.Layers)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || !cfg.Created.Time.Equal(ociimage.Epoch) {
		t.Errorf("config %s/%s created %v, want linux/amd64 at the epoch", cfg.OS, cfg.Architecture, cfg.Created)
	}
	want := v1.Config{
		Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, Env: spec.Env, User: spec.User,
		WorkingDir: spec.WorkingDir, Labels: spec.Labels,
	}
	if diff := cmp.Diff(want, cfg.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || len(cfg.History) != 1 || !cfg.History[0].Created.Time.Equal(ociimage.Epoch) {
		t.Errorf("config rootfs %+v, history %+v: want one layer made at the epoch", cfg.RootFS, cfg.History)
	}

	wantFiles := map[string]layerFile{
		"bin/":               {Type: tar.TypeDir, Mode: 0o755},
		"bin/busybox":        {Type: tar.TypeReg, Mode: 0o755, Data: "ELF"},
		"bin/sh":             {Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"},
		"etc/":               {Type: tar.TypeDir, Mode: 0o755},
		"etc/motd":           {Type: tar.TypeReg, Mode: 0o644, Data: "hello\n"},
		"home/":              {Type: tar.TypeDir, Mode: 0o755},
		"home/nonroot/":      {Type: tar.TypeDir, Mode: 0o700, UID: 65532, GID: 65532},
		"tmp/":               {Type: tar.TypeDir, Mode: 0o1777},
		"usr/":               {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/":         {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/bin/":     {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/bin/tool": {Type: tar.TypeReg, Mode: 0o750, Data: "#!/bin/sh\necho tool\n"},
	}
	if diff := cmp.Diff(wantFiles, files(t, img)); diff != "" {
		t.Errorf("image files (-want +got):\n%s", diff)
	}

	// The layout's own order: a parent directory before what it holds,
	// the index last.
	var names []string
	for _, hdr := range headers(t, tarball) {
		names = append(names, hdr.Name)
	}
	if len(names) != 7 || names[0] != "oci-layout" || names[1] != "blobs/" || names[2] != "blobs/sha256/" || names[6] != "index.json" {
		t.Errorf("layout entries %v: want oci-layout, blobs/, blobs/sha256/, a layer, the config, the manifest, index.json", names)
	}
}

// TestDeterministic: the same files and configuration give the same
// tarball byte for byte, whatever order the files are listed in and
// whenever the host file was written; any change of content, mode,
// configuration or name changes it.
func TestDeterministic(t *testing.T) {
	host := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(host, []byte("payload"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := func() ociimage.Spec {
		return ociimage.Spec{
			Files: []ociimage.File{
				{Path: "/a/b", Data: []byte("b")},
				{Path: "/data", Source: host},
				{Path: "/a/c", Link: "b"},
			},
			Entrypoint: []string{"/data"},
		}
	}
	first := build(t, base(), "img:v1")
	reordered := base()
	reordered.Files[0], reordered.Files[2] = reordered.Files[2], reordered.Files[0]
	if err := os.Chtimes(host, ociimage.Epoch.AddDate(40, 0, 0), ociimage.Epoch.AddDate(40, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if again := build(t, reordered, "img:v1"); !bytes.Equal(first, again) {
		t.Error("the same inputs, listed in another order, gave another tarball")
	}

	changes := map[string]func(s *ociimage.Spec) string{
		"content":    func(s *ociimage.Spec) string { s.Files[0].Data = []byte("B"); return "img:v1" },
		"mode":       func(s *ociimage.Spec) string { s.Files[0].Mode = 0o600; return "img:v1" },
		"owner":      func(s *ociimage.Spec) string { s.Files[0].UID = 1; return "img:v1" },
		"entrypoint": func(s *ociimage.Spec) string { s.Entrypoint = []string{"/a/b"}; return "img:v1" },
		"env":        func(s *ociimage.Spec) string { s.Env = []string{"A=1"}; return "img:v1" },
		"user":       func(s *ociimage.Spec) string { s.User = "65532"; return "img:v1" },
		"name":       func(s *ociimage.Spec) string { return "img:v2" },
	}
	for what, change := range changes {
		s := base()
		ref := change(&s)
		if bytes.Equal(first, build(t, s, ref)) {
			t.Errorf("changing the %s left the tarball as it was", what)
		}
	}
}

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":                         "docker.io/library/busybox:latest",
		"busybox:dractl":                  "docker.io/library/busybox:dractl",
		"dractl-scheduler:dev":            "docker.io/library/dractl-scheduler:dev",
		"docker.io/library/pause:3.10":    "docker.io/library/pause:3.10",
		"dractl/driver:v1":                "docker.io/dractl/driver:v1",
		"registry.k8s.io/pause:3.10":      "registry.k8s.io/pause:3.10",
		"localhost:5000/dractl/monitor:x": "localhost:5000/dractl/monitor:x",
	} {
		got, err := ociimage.Normalize(ref)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for _, ref := range []string{"", "Upper:tag", "busybox@sha256:" + strings.Repeat("0", 64), "a:b:c"} {
		if got, err := ociimage.Normalize(ref); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", ref, got)
		}
	}
}

func TestBadFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		files []ociimage.File
		want  string
	}{
		"relative":       {[]ociimage.File{{Path: "bin/x", Data: []byte("x")}}, `file 0 ("bin/x"): the path must be absolute and clean`},
		"unclean":        {[]ociimage.File{{Path: "/bin/../x", Data: []byte("x")}}, `file 0 ("/bin/../x"): the path must be absolute and clean`},
		"root":           {[]ociimage.File{{Path: "/", Mode: fs.ModeDir}}, `file 0 ("/"): the path must be absolute and clean, and not /`},
		"two kinds":      {[]ociimage.File{{Path: "/x", Data: []byte("x"), Link: "y"}}, `file 0 ("/x"): give one of Data, Source, Link or fs.ModeDir`},
		"device":         {[]ociimage.File{{Path: "/x", Mode: fs.ModeDevice}}, `file 0 ("/x"): mode`},
		"twice":          {[]ociimage.File{{Path: "/x", Data: []byte("1")}, {Path: "/x", Data: []byte("2")}}, `file 1 ("/x"): the image already has an entry at that path`},
		"file and dir":   {[]ociimage.File{{Path: "/x", Mode: fs.ModeDir}, {Path: "/x", Data: []byte("2")}}, `file 1 ("/x"): the image already has an entry at that path`},
		"parent a file":  {[]ociimage.File{{Path: "/x", Data: []byte("1")}, {Path: "/x/y", Data: []byte("2")}}, `"/x/y": its parent /x is not a directory in the image`},
		"missing source": {[]ociimage.File{{Path: "/x", Source: "/nonexistent/dractl"}}, `file 0 ("/x"): open /nonexistent/dractl: no such file or directory`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ociimage.Build(ociimage.Spec{Files: tc.files})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error with %q", err, tc.want)
			}
		})
	}
	// The same directory named twice is one directory.
	if _, err := ociimage.Build(ociimage.Spec{Files: []ociimage.File{{Path: "/d", Mode: fs.ModeDir}, {Path: "/d", Mode: fs.ModeDir}}}); err != nil {
		t.Errorf("a directory named twice: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	img, err := ociimage.Build(ociimage.Spec{Files: []ociimage.File{{Path: "/x", Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "images", "x.tar")
	if err := ociimage.WriteFile(out, "x:dev", img); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ociimage.Write(&buf, "x:dev", img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, buf.Bytes()) {
		t.Error("WriteFile wrote other bytes than Write")
	}
	if err := ociimage.WriteFile(out, "x@sha256:"+strings.Repeat("0", 64), img); err == nil {
		t.Error("WriteFile with a digest reference: no error")
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(after, data) {
		t.Error("a failed WriteFile changed the file it would have replaced")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*")); len(left) != 0 {
		t.Errorf("a failed WriteFile left %v", left)
	}
}

// TestUnpackRefusesEscapes: a layout entry outside the layout's directory
// is refused, not written.
func TestUnpackRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../escape", "/abs"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 1}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte("x"))
		tw.Close()
		dir := t.TempDir()
		if _, err := ociimage.Unpack(&buf, filepath.Join(dir, "layout")); err == nil || !strings.Contains(err.Error(), "not a path inside the layout") {
			t.Errorf("entry %q: %v, want it refused", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
			t.Errorf("entry %q was written outside the layout", name)
		}
	}
}
