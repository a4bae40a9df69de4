// Command dractl-scheduler, built for Kubernetes 1.38: the same program as
// ../main.go, in the module that pins kube-scheduler v1.38 and its staging
// modules (build it with -tags k8s138, as the Makefile does; docs/versions.md).
package main

import (
	"os"

	"github.com/dractl/dractl/scheduler/app"
)

func main() { os.Exit(app.Main()) }
