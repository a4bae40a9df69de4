// Command dractl-scheduler is kube-scheduler with dractl's DRA plugin
// registered. Its configuration decides where the plugin runs: in a
// profile of its own beside kube-scheduler, or in place of kube-scheduler,
// in the default profile or beside the stock one (see deploy/scheduler).
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
