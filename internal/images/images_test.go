package images

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dractl/dractl/internal/ociimage"
)

// TestChartNames: the table builds every image the chart's values name
// and no other.
func TestChartNames(t *testing.T) {
	names, err := ChartNames(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkTable(names); err != nil {
		t.Error(err)
	}
	if got := names["driver"]; got.Ref() != "dractl-gpu-driver:dev" || got.MinorTags != nil {
		t.Errorf("images.driver = %+v, want dractl-gpu-driver:dev", got)
	}
	if got, ok := names["scheduler"].ForMinor("1.38"); !ok || got.Ref() != "dractl-scheduler:dev-1.38" {
		t.Errorf("images.scheduler for 1.38 = %+v, want dractl-scheduler:dev-1.38", got)
	}
	// The values without the 1.38 scheduler's tag, or with a tag of a
	// minor the table builds no image of.
	without, other := map[string]Name{}, map[string]Name{}
	for k, v := range names {
		without[k], other[k] = v, v
	}
	without["scheduler"] = Name{Repository: "dractl-scheduler", Tag: "dev"}
	if err := checkTable(without); err == nil || !strings.Contains(err.Error(), `names no image "scheduler" for Kubernetes 1.38`) {
		t.Errorf("values without the 1.38 scheduler: %v", err)
	}
	other["scheduler"] = Name{Repository: "dractl-scheduler", Tag: "dev", MinorTags: map[string]string{"1.38": "dev-1.38", "1.36": "dev-1.36"}}
	if err := checkTable(other); err == nil || !strings.Contains(err.Error(), `names image "scheduler" for Kubernetes 1.36, which internal/images does not build`) {
		t.Errorf("values with a 1.36 scheduler: %v", err)
	}
	missing := map[string]Name{}
	for k, v := range names {
		missing[k] = v
	}
	delete(missing, "dractl")
	if err := checkTable(missing); err == nil || !strings.Contains(err.Error(), `names no image "dractl"`) {
		t.Errorf("values without the dractl image: %v", err)
	}
	extra := map[string]Name{"sidecar": {Repository: "x", Tag: "y"}}
	for k, v := range names {
		extra[k] = v
	}
	if err := checkTable(extra); err == nil || !strings.Contains(err.Error(), `names image "sidecar", which internal/images does not build`) {
		t.Errorf("values with an image the table lacks: %v", err)
	}
}

// readImage reads an image-layout tarball back with go-containerregistry's
// layout reader: the name its index gives the image, and the image.
func readImage(t *testing.T, tarball string) (string, v1.Image) {
	t.Helper()
	f, err := os.Open(tarball)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lp, err := ociimage.Unpack(f, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s: %d images, want 1", tarball, len(im.Manifests))
	}
	img, err := lp.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests[0].Annotations[ociimage.AnnotationImageName], img
}

// TestBuild builds the driver's image, the one with a cgo binary and a
// static one (the others are one static binary each; `make images`
// builds them all), and reads the tarball back: named as the chart's pods
// ask for it, its entrypoints executables in it, run as the table says,
// the cgo driver's loader and libraries in it. (That equal sources give
// equal images is ociimage's TestDeterministic: a second go build here
// would link the driver again, minutes on a loaded machine.)
func TestBuild(t *testing.T) {
	out := t.TempDir()
	opts := Options{Repo: repoRoot, Out: out, Only: []string{"driver"}}
	results, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d images built, want 1", len(results))
	}
	names, err := ChartNames(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		t.Logf("%s: %s, %d bytes, %v", res.Ref, res.Digest, res.Size, res.Took)
		if want := names[res.Image.Key].Ref(); res.Ref != want {
			t.Errorf("%s: ref %q, want the chart's %q", res.Image.Key, res.Ref, want)
		}
		name, img := readImage(t, res.Tarball)
		if want, _ := ociimage.Normalize(res.Ref); name != want {
			t.Errorf("%s: imported as %q, want %q", res.Tarball, name, want)
		}
		if d, _ := img.Digest(); d != res.Digest {
			t.Errorf("%s: digest %s, Build said %s", res.Tarball, d, res.Digest)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != res.Image.User || !slices.Equal(cfg.Config.Entrypoint, res.Image.Entrypoint) {
			t.Errorf("%s: user %q entrypoint %q, want %q %q", res.Tarball, cfg.Config.User, cfg.Config.Entrypoint, res.Image.User, res.Image.Entrypoint)
		}
		libs, err := Check(img, res.Image)
		if err != nil {
			t.Errorf("%s: %v", res.Tarball, err)
		}
		got := libs["/dractl-gpu-driver"]
		if len(got) < 2 || got[0] != "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" || !slices.Contains(got, "/lib/x86_64-linux-gnu/libc.so.6") {
			t.Errorf("the driver loads %v in its image, want the loader and libc", got)
		}
		// What the host's libnvidia-ml.so.1, opened at run time, links
		// beside libc.
		tree, err := FilesOf(img)
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range []string{"libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"} {
			if _, _, err := tree.Lookup("/lib/x86_64-linux-gnu/" + lib); err != nil {
				t.Errorf("the driver's image: %v", err)
			}
		}
		if _, ok := libs["/dractl-pool-publisher"]; ok {
			t.Errorf("the pool publisher loads %v, want a static binary", libs["/dractl-pool-publisher"])
		}
	}
}

// TestCheck refuses images that would not start.
func TestCheck(t *testing.T) {
	img := Image{Entrypoint: []string{"/bin/x"}, Binaries: []Binary{{Path: "/bin/x"}}}
	for name, tc := range map[string]struct {
		spec ociimage.Spec
		want string
	}{
		"no entrypoint file": {ociimage.Spec{Entrypoint: []string{"/bin/x"}, Files: []ociimage.File{{Path: "/bin/y", Data: []byte("y"), Mode: 0o755}}},
			"/bin/x: file does not exist in the image"},
		"not executable": {ociimage.Spec{Entrypoint: []string{"/bin/x"}, Files: []ociimage.File{{Path: "/bin/x", Source: "/usr/bin/true", Mode: 0o644}}},
			"/bin/x: not an executable file in the image (mode 644)"},
		"other entrypoint": {ociimage.Spec{Entrypoint: []string{"/bin/y"}, Files: []ociimage.File{{Path: "/bin/x", Source: "/usr/bin/true"}}},
			`entrypoint ["/bin/y"], want ["/bin/x"]`},
		"no libc": {ociimage.Spec{Entrypoint: []string{"/bin/x"}, Files: []ociimage.File{{Path: "/bin/x", Source: "/usr/bin/true"}}},
			"/bin/x: its loader: /lib64: file does not exist in the image"},
	} {
		i, err := ociimage.Build(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Check(i, img); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
