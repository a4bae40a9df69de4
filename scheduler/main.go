// Command dractl-scheduler is kube-scheduler with dractl's DRA plugin
// registered. Its configuration decides where the plugin runs: in a
// profile of its own beside kube-scheduler, or in place of kube-scheduler,
// in the default profile or beside the stock one (see deploy/scheduler).
package main

import (
	"os"

	"github.com/dractl/dractl/scheduler/app"
)

func main() { os.Exit(app.Main()) }
