// Command build is `make images`: it builds every image the Helm chart
// names (deploy/helm/dractl/values.yaml) from the repository, without a
// container engine, as OCI image-layout tarballs for `ctr images import`.
// A build tool, not a product: it lives under internal/ beside the
// table it builds from, not in cmd/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/dractl/dractl/internal/images"
)

func main() {
	var opts images.Options
	var only string
	flag.StringVar(&opts.Repo, "repo", ".", "repository root")
	flag.StringVar(&opts.Out, "out", "bin/images", "directory of the tarballs")
	flag.StringVar(&opts.Tag, "tag", "", "tag of every image; the chart's tags when empty")
	flag.StringVar(&opts.Version, "version", "", `version stamped into dractl ("dev" when empty)`)
	flag.StringVar(&only, "only", "", "comma-separated keys of values.yaml's images: to build; every image when empty")
	flag.StringVar(&opts.Go, "go", "go", "go command")
	flag.Parse()
	if only != "" {
		opts.Only = strings.Split(only, ",")
	}
	opts.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := images.Build(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	for _, r := range results {
		fmt.Printf("%s\t%s\t%s\t%.1f MB\t%.0fs\n", r.Tarball, r.Ref, r.Digest, float64(r.Size)/1e6, r.Took.Seconds())
	}
}
