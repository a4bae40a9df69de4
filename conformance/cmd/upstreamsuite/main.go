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
	"time"

	"github.com/dractl/dractl/conformance/upstreamsuite"
)

func main() {
	repo := flag.String("repo", "..", "root of the dractl checkout to test")
	want := flag.Int("want", 283, "number of cases the suite of "+upstreamsuite.Module+" has")
	work := flag.String("work", "", "directory to copy the module into and keep (default: a temporary one, removed)")
	verbose := flag.Bool("v", false, "print the go commands' output")
	count := flag.Int("count", 3, "runs of every case; the time reported is the smallest")
	flag.Parse()

	opts := upstreamsuite.Options{Repo: *repo, Work: *work, Count: *count}
	if *verbose {
		opts.Log = os.Stderr
	}
	rep, err := upstreamsuite.Run(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamsuite:", err)
		os.Exit(1)
	}
	for _, c := range rep.Cases {
		fmt.Printf("%-4s %-100s dractl %8.3f ms (first run %8.3f ms)\n", strings.ToUpper(c.Result), c.Name, ms(c.Dractl), ms(c.First))
	}
	for _, c := range rep.Cases {
		if c.Result == "fail" {
			fmt.Printf("\n--- %s\n%s", c.Name, c.Output)
		}
	}
	passed, failed, skipped := rep.Count("pass"), rep.Count("fail"), rep.Count("skip")
	// Times are from building the allocator to the end of Allocate.
	best := rep.Slowest(func(c upstreamsuite.Case) time.Duration { return c.Dractl })
	first := rep.Slowest(func(c upstreamsuite.Case) time.Duration { return c.First })
	fmt.Printf("\nslowest case, best of %d runs: %s, %.3f ms\n", *count, best.Name, ms(best.Dractl))
	fmt.Printf("slowest case, first run (CEL compiled cold): %s, %.3f ms\n", first.Name, ms(first.First))
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
