// Package images builds the container images the Helm chart names
// (deploy/helm/dractl, values.yaml `images:`) from this repository,
// without a container engine: each binary with `go build`, each image
// with internal/ociimage, written as an OCI image-layout tarball that
// containerd imports. `make images` runs it (internal/images/build).
//
// Images is the one table of what each image is: the builder builds from
// it and a test holds the Dockerfiles that build the same images with
// Docker (deploy/driver, deploy/monitor, scheduler/) to the same
// binaries, entrypoints and users.
package images

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// NonRoot is the user of the images that need no privilege: distroless's
// "nonroot", by number, so that no /etc/passwd is needed.
const NonRoot = "65532:65532"

// Binary is one program of an image.
type Binary struct {
	// Path is where it is in the image.
	Path string
	// Module is the directory of the Go module it is built in, relative
	// to the repository root.
	Module string
	// Package is its main package, relative to Module.
	Package string
	// Cgo builds it with CGO_ENABLED=1, and the image carries the C
	// library it links and the loader: the NVML backend loads
	// libnvidia-ml.so.1 from the host at run time (dlopen), which only a
	// dynamically linked binary can.
	Cgo bool
	// Tags are its build tags (go build -tags), as the Makefile's
	// release builds set them.
	Tags string
	// Strip leaves out the symbol table and DWARF (-ldflags "-s -w").
	Strip bool
	// Version stamps the build's version into internal/cli, which
	// `dractl version` prints.
	Version bool
	// Toolchain is the Go toolchain it needs (GOTOOLCHAIN), when newer
	// than the machine's: Kubernetes 1.38's modules need Go 1.27, which
	// the module proxy serves (the Makefile's GOTOOLCHAIN_138).
	Toolchain string
}

// Image is one image of the chart.
type Image struct {
	// Key is the image's key under values.yaml's `images:`, whose
	// repository and tag name it.
	Key string
	// Minor is the Kubernetes minor ("1.38") of an image the chart runs
	// on that minor only, named by the key's minorTags; empty for the
	// image its tag names.
	Minor string
	// Dockerfile builds the same image with Docker, from the repository
	// root.
	Dockerfile string
	Binaries   []Binary
	Entrypoint []string
	// User runs the entrypoint; empty is root.
	User string
}

// ReleaseTags are the build tags of the main module's release binaries
// (the Makefile's RELEASE_FLAGS): grpcnotrace leaves out gRPC's
// x/net/trace, whose html/template keeps every exported method of every
// type in the binary, for tracing nothing turns on.
const ReleaseTags = "grpcnotrace"

// Images is every image the chart names. The driver runs as root: it
// creates the kubelet plugin's sockets, CDI specs and, with NVML, MIG
// devices on the host.
var Images = []Image{
	{
		Key:        "scheduler",
		Dockerfile: "scheduler/Dockerfile",
		Binaries:   []Binary{{Path: "/dractl-scheduler", Module: "scheduler", Package: "."}},
		Entrypoint: []string{"/dractl-scheduler"},
		User:       NonRoot,
	},
	{
		Key:        "scheduler",
		Minor:      "1.38",
		Dockerfile: "scheduler/k8s138/Dockerfile",
		Binaries:   []Binary{{Path: "/dractl-scheduler", Module: "scheduler/k8s138", Package: ".", Tags: "k8s138", Toolchain: "go1.27.3"}},
		Entrypoint: []string{"/dractl-scheduler"},
		User:       NonRoot,
	},
	{
		Key:        "dractl",
		Dockerfile: "deploy/monitor/Dockerfile",
		Binaries:   []Binary{{Path: "/dractl", Module: ".", Package: "./cmd/dractl", Tags: ReleaseTags, Strip: true, Version: true}},
		Entrypoint: []string{"/dractl"},
		User:       NonRoot,
	},
	{
		Key:        "driver",
		Dockerfile: "deploy/driver/Dockerfile",
		Binaries: []Binary{
			{Path: "/dractl-gpu-driver", Module: ".", Package: "./cmd/dractl-gpu-driver", Cgo: true, Tags: ReleaseTags, Strip: true},
			{Path: "/dractl-pool-publisher", Module: ".", Package: "./cmd/dractl-pool-publisher", Tags: ReleaseTags, Strip: true},
		},
		Entrypoint: []string{"/dractl-gpu-driver"},
	},
}

// ValuesFile is the chart's values, relative to the repository root.
const ValuesFile = "deploy/helm/dractl/values.yaml"

// Name is an image's repository and tag as the chart's values give them.
type Name struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// MinorTags are the tags of the key's images for other Kubernetes
	// minors, by minor ("1.38").
	MinorTags map[string]string `json:"minorTags,omitempty"`
}

// ForMinor is the name of the image of minor: the minor's tag, or the
// name itself for the image its tag names ("").
func (n Name) ForMinor(minor string) (Name, bool) {
	if minor == "" {
		return Name{Repository: n.Repository, Tag: n.Tag}, true
	}
	tag, ok := n.MinorTags[minor]
	return Name{Repository: n.Repository, Tag: tag}, ok && tag != ""
}

// Ref is the reference the chart's pods name the image by.
func (n Name) Ref() string { return n.Repository + ":" + n.Tag }

// ChartNames reads the names of the chart's images from its values under
// repo, by key. Entries of `images:` that are not objects with a
// repository (pullPolicy) are not images.
func ChartNames(repo string) (map[string]Name, error) {
	path := filepath.Join(repo, ValuesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var values struct {
		Images map[string]any `json:"images"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	names := map[string]Name{}
	for key, v := range values.Images {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		repository, _ := m["repository"].(string)
		tag, _ := m["tag"].(string)
		if repository == "" || tag == "" {
			return nil, fmt.Errorf("%s: images.%s: want a repository and a tag, found %v", path, key, v)
		}
		name := Name{Repository: repository, Tag: tag}
		if mt, ok := m["minorTags"].(map[string]any); ok {
			name.MinorTags = map[string]string{}
			for minor, v := range mt {
				t, _ := v.(string)
				if t == "" {
					return nil, fmt.Errorf("%s: images.%s.minorTags.%s: want a tag, found %v", path, key, minor, v)
				}
				name.MinorTags[minor] = t
			}
		}
		names[key] = name
	}
	return names, nil
}
