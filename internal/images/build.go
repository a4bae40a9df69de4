package images

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dractl/dractl/internal/ociimage"
)

// Path is the search path of every image, as distroless images set it:
// the Dockerfiles' images and these run binaries by the same names.
const Path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// VersionVar is the variable a Binary with Version has the build's
// version in (`go build -ldflags -X`).
const VersionVar = "github.com/dractl/dractl/internal/cli.version"

// Options are what Build builds and where.
type Options struct {
	// Repo is the repository root.
	Repo string
	// Out is the directory the tarballs are written to.
	Out string
	// Tag names every image instead of the chart's tags when set.
	Tag string
	// Version is stamped into the binaries with Version ("dev" when
	// empty, as the Dockerfiles stamp it).
	Version string
	// Only builds the images of these keys; every image when empty.
	Only []string
	// Go is the go command ("go" when empty).
	Go string
	// Log gets a line per step; nil is silent.
	Log io.Writer
}

// Result is one image built.
type Result struct {
	Image Image
	// Ref is the name the chart's pods give the image
	// (dractl-scheduler:dev); the tarball names it normalized
	// (docker.io/library/dractl-scheduler:dev), as the kubelet asks for it.
	Ref string
	// Tarball is the OCI image-layout tarball's path.
	Tarball string
	Digest  v1.Hash
	// Size is the tarball's size in bytes.
	Size int64
	// Libraries are, per dynamically linked binary, the shared objects
	// it loads in the image, the loader first.
	Libraries map[string][]string
	// Took is how long the image took to build, its binaries' builds
	// included.
	Took time.Duration
}

// TarballName is the file the tarball of an image of minor ("" for the
// one the tag names) is written to under Options.Out.
func TarballName(n Name, minor string) string {
	base := strings.ReplaceAll(n.Repository, "/", "_")
	if minor != "" {
		base += "-" + minor
	}
	return base + ".tar"
}

// Build builds the images of the table that the chart names and writes
// each as an OCI image-layout tarball: its binaries built for
// linux/amd64 (-trimpath, so that where the repository is does not
// change a digest), the C library of a cgo binary from this machine, and
// a check that every entrypoint is in the image and that each dynamically
// linked binary finds its loader and libraries there.
func Build(ctx context.Context, opts Options) ([]Result, error) {
	names, err := ChartNames(opts.Repo)
	if err != nil {
		return nil, err
	}
	if err := checkTable(names); err != nil {
		return nil, err
	}
	for _, key := range opts.Only {
		if _, ok := names[key]; !ok {
			return nil, fmt.Errorf("no image %q in %s (images: %s)", key, ValuesFile, strings.Join(keys(names), ", "))
		}
	}
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	work, err := os.MkdirTemp("", "dractl-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	var results []Result
	for _, img := range Images {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, img.Key) {
			continue
		}
		name, _ := names[img.Key].ForMinor(img.Minor)
		if opts.Tag != "" {
			name.Tag = opts.Tag
			if img.Minor != "" {
				name.Tag += "-" + img.Minor
			}
		}
		start := time.Now()
		dir := img.Key
		if img.Minor != "" {
			dir += "-" + img.Minor
		}
		res, err := buildImage(ctx, opts, img, name, filepath.Join(work, dir))
		if err != nil {
			return results, fmt.Errorf("image %s (%s): %w", img.Key, name.Ref(), err)
		}
		res.Took = time.Since(start)
		results = append(results, res)
	}
	return results, nil
}

// checkTable holds the table and the chart's values to the same images,
// those of each minor included.
func checkTable(names map[string]Name) error {
	var inTable []string
	for _, img := range Images {
		inTable = append(inTable, img.Key+"@"+img.Minor)
		name, ok := names[img.Key]
		if !ok {
			return fmt.Errorf("%s names no image %q, which internal/images builds", ValuesFile, img.Key)
		}
		if _, ok := name.ForMinor(img.Minor); !ok {
			return fmt.Errorf("%s names no image %q for Kubernetes %s (images.%s.minorTags), which internal/images builds", ValuesFile, img.Key, img.Minor, img.Key)
		}
	}
	for key, name := range names {
		if !slices.Contains(inTable, key+"@") {
			return fmt.Errorf("%s names image %q, which internal/images does not build", ValuesFile, key)
		}
		for minor := range name.MinorTags {
			if !slices.Contains(inTable, key+"@"+minor) {
				return fmt.Errorf("%s names image %q for Kubernetes %s, which internal/images does not build", ValuesFile, key, minor)
			}
		}
	}
	return nil
}

func keys(names map[string]Name) []string {
	var ks []string
	for k := range names {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func buildImage(ctx context.Context, opts Options, img Image, name Name, work string) (Result, error) {
	var files []ociimage.File
	seen := map[string]bool{}
	for _, b := range img.Binaries {
		out := filepath.Join(work, filepath.Base(b.Path))
		if err := goBuild(ctx, opts, b, out); err != nil {
			return Result{}, err
		}
		files = append(files, ociimage.File{Path: b.Path, Source: out, Mode: 0o755})
		if !b.Cgo {
			continue
		}
		libc, err := CLibrary(out)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", b.Path, err)
		}
		for _, f := range libc {
			if !seen[f.Path] {
				seen[f.Path] = true
				files = append(files, f)
			}
		}
	}
	image, err := ociimage.Build(ociimage.Spec{
		Files:      files,
		Entrypoint: img.Entrypoint,
		Env:        []string{Path},
		User:       img.User,
	})
	if err != nil {
		return Result{}, err
	}
	libs, err := Check(image, img)
	if err != nil {
		return Result{}, err
	}
	tarball := filepath.Join(opts.Out, TarballName(name, img.Minor))
	if err := ociimage.WriteFile(tarball, name.Ref(), image); err != nil {
		return Result{}, err
	}
	fi, err := os.Stat(tarball)
	if err != nil {
		return Result{}, err
	}
	digest, err := image.Digest()
	if err != nil {
		return Result{}, err
	}
	return Result{Image: img, Ref: name.Ref(), Tarball: tarball, Digest: digest, Size: fi.Size(), Libraries: libs}, nil
}

// Check reads the filesystem of an image built for img and finds in it
// the entrypoint, an executable file, and every binary of the table with
// the loader and the shared objects it loads, returned per dynamically
// linked binary.
func Check(image v1.Image, img Image) (map[string][]string, error) {
	tree, err := FilesOf(image)
	if err != nil {
		return nil, err
	}
	cfg, err := image.ConfigFile()
	if err != nil {
		return nil, err
	}
	if !slices.Equal(cfg.Config.Entrypoint, img.Entrypoint) || len(img.Entrypoint) == 0 {
		return nil, fmt.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, img.Entrypoint)
	}
	paths := []string{img.Entrypoint[0]}
	for _, b := range img.Binaries {
		paths = append(paths, b.Path)
	}
	libs := map[string][]string{}
	for _, p := range paths {
		n, _, err := tree.Lookup(p)
		if err != nil {
			return nil, err
		}
		if n.Dir || n.Mode&0o111 == 0 {
			return nil, fmt.Errorf("%s: not an executable file in the image (mode %o)", p, n.Mode)
		}
		l, err := tree.Libraries(p)
		if err != nil {
			return nil, err
		}
		if len(l) > 0 {
			libs[p] = l
		}
	}
	return libs, nil
}

func goBuild(ctx context.Context, opts Options, b Binary, out string) error {
	args := []string{"build", "-trimpath"}
	if b.Tags != "" {
		args = append(args, "-tags", b.Tags)
	}
	var ldflags []string
	if b.Strip {
		ldflags = append(ldflags, "-s", "-w")
	}
	if b.Version {
		ldflags = append(ldflags, "-X", VersionVar+"="+opts.Version)
	}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	args = append(args, "-o", out, b.Package)
	cgo := "0"
	if b.Cgo {
		// cgo links against this machine's C library, which the image
		// then carries: it builds only for the machine's own platform.
		if runtime.GOOS != ociimage.OS || runtime.GOARCH != ociimage.Architecture {
			return fmt.Errorf("%s: cgo builds for %s/%s only on a %s/%s machine, this is %s/%s",
				b.Path, ociimage.OS, ociimage.Architecture, ociimage.OS, ociimage.Architecture, runtime.GOOS, runtime.GOARCH)
		}
		cgo = "1"
	}
	cmd := exec.CommandContext(ctx, opts.Go, args...)
	cmd.Dir = filepath.Join(opts.Repo, b.Module)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS="+ociimage.OS, "GOARCH="+ociimage.Architecture)
	env := "CGO_ENABLED=" + cgo
	if b.Toolchain != "" {
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+b.Toolchain)
		env = "GOTOOLCHAIN=" + b.Toolchain + " " + env
	}
	if opts.Log != nil {
		shown := make([]string, len(args))
		for i, a := range args {
			shown[i] = a
			if strings.Contains(a, " ") {
				shown[i] = strconv.Quote(a)
			}
		}
		fmt.Fprintf(opts.Log, "(cd %s && %s %s %s)\n", b.Module, env, opts.Go, strings.Join(shown, " "))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", b.Package, err, msg)
	}
	return nil
}
