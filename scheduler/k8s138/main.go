// Command dractl-scheduler, built for Kubernetes 1.38: the same program as
// ../main.go, in the module that pins kube-scheduler v1.38 and its staging
// modules (build it with -tags k8s138, as the Makefile does; docs/versions.md).
package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"

	"github.com/dractl/dractl/scheduler/app"
)

func main() {
	stop, err := app.StartProfiling()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := cli.Run(app.NewCommand())
	stop()
	os.Exit(code)
}
