// Command upstreamsuite runs the allocator test suite of
// k8s.io/dynamic-resource-allocation against dractl (see package
// upstreamsuite) and reports every case. It exits non-zero unless every
// case passes and the suite has the expected number of cases. Its last
// line is "N passed, M failed".
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dractl/dractl/conformance/upstreamsuite"
)

func main() {
	repo := flag.String("repo", "..", "root of the dractl checkout to test")
	want := flag.Int("want", 283, "number of cases the suite of "+upstreamsuite.Module+" has")
	work := flag.String("work", "", "directory to copy the module into and keep (default: a temporary one, removed)")
	verbose := flag.Bool("v", false, "print the go commands' output")
	flag.Parse()

	opts := upstreamsuite.Options{Repo: *repo, Work: *work}
	if *verbose {
		opts.Log = os.Stderr
	}
	rep, err := upstreamsuite.Run(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamsuite:", err)
		os.Exit(1)
	}
	for _, c := range rep.Cases {
		fmt.Printf("%-4s %-100s dractl %8.3f ms\n", strings.ToUpper(c.Result), c.Name, float64(c.Dractl.Microseconds())/1000)
	}
	for _, c := range rep.Cases {
		if c.Result == "fail" {
			fmt.Printf("\n--- %s\n%s", c.Name, c.Output)
		}
	}
	worst := rep.Slowest()
	passed, failed, skipped := rep.Count("pass"), rep.Count("fail"), rep.Count("skip")
	fmt.Printf("\nslowest case: %s, %.3f ms from building the State to the end of Allocate\n",
		worst.Name, float64(worst.Dractl.Microseconds())/1000)
	ok := failed == 0 && skipped == 0 && len(rep.Cases) == *want
	if len(rep.Cases) != *want {
		fmt.Printf("the suite has %d cases, expected %d\n", len(rep.Cases), *want)
	}
	if skipped > 0 {
		fmt.Printf("%d cases skipped: every case must run\n", skipped)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed+skipped+max(*want-len(rep.Cases), 0))
	if !ok {
		os.Exit(1)
	}
}
