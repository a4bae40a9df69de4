// Command dractl validates, flattens and compacts Kubernetes DRA
// ResourceSlices. Everything but the process exit lives in internal/cli so
// that tests run the commands in-process.
package main

import (
	"os"

	"github.com/dractl/dractl/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
