// Command manifests writes deploy/{scheduler,monitor,driver} from the Helm
// chart deploy/helm/dractl with its default values (`make manifests`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dractl/dractl/e2e/helmchart"
)

func main() {
	repo := flag.String("repo", "..", "the repository root")
	flag.Parse()
	if err := helmchart.Write(*repo); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}
