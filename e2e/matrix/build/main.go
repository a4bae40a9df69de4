// Command build builds etcd and the kube-apiserver of each release the
// matrix runs against into bin/ (`make e2e-matrix`), skipping those built
// already, and says how long each took.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/dractl/dractl/e2e/matrix"
)

func main() {
	bin := flag.String("bin", "../bin", "where the binaries go")
	releases := flag.String("releases", strings.Join(matrix.Releases, ","), "the kube-apiserver releases, comma-separated")
	toolchain := flag.String("toolchain", "", "GOTOOLCHAIN for the releases that need a newer Go than this one (1.38: go1.27.3)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := matrix.BuildEtcd(ctx, ".", *bin, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "building etcd:", err)
		os.Exit(1)
	}
	for _, r := range strings.Split(*releases, ",") {
		took, err := matrix.BuildAPIServer(ctx, *bin, r, *toolchain, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if took == 0 {
			fmt.Printf("%s: built already (%s)\n", r, matrix.APIServerBinary(*bin, r))
		} else {
			fmt.Printf("%s: built in %s (%s)\n", r, took.Round(1e9), matrix.APIServerBinary(*bin, r))
		}
	}
}
