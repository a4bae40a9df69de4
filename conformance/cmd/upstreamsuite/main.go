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
	"slices"
	"strings"
	"time"

	"github.com/dractl/dractl/conformance/upstreamsuite"
)

func main() {
	repo := flag.String("repo", "..", "root of the dractl checkout to test")
	want := flag.Int("want", 0, "number of cases the suite has (default: the release's own count, "+upstreamsuite.Module+": "+fmt.Sprint(upstreamsuite.Releases[0].Cases)+")")
	work := flag.String("work", "", "directory to copy the module into and keep (default: a temporary one, removed)")
	verbose := flag.Bool("v", false, "print the go commands' output")
	count := flag.Int("count", 3, "runs of every case; the time reported is the smallest")
	versions := flag.String("versions", "", "space- or comma-separated Kubernetes minors whose release of the suite to run, or all (default: "+upstreamsuite.Releases[0].Minor+")")
	toolchain := flag.String("toolchain", "", "GOTOOLCHAIN for the releases that need a newer Go than this one (1.38: go1.27.3)")
	flag.Parse()

	releases, err := pick(*versions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstreamsuite:", err)
		os.Exit(2)
	}
	passed, failed, ok := 0, 0, true
	for _, rel := range releases {
		if len(releases) > 1 {
			fmt.Printf("%s (Kubernetes %s)\n", rel.Module, rel.Minor)
		}
		opts := upstreamsuite.Options{Repo: *repo, Work: *work, Count: *count, Release: rel, Toolchain: *toolchain}
		if *verbose {
			opts.Log = os.Stderr
		}
		n := rel.Cases
		if *want > 0 {
			n = *want
		}
		p, f, good := runRelease(opts, n)
		passed, failed, ok = passed+p, failed+f, ok && good
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if !ok {
		os.Exit(1)
	}
}

// pick returns the releases -versions names.
func pick(versions string) ([]upstreamsuite.Release, error) {
	names := strings.FieldsFunc(versions, func(r rune) bool { return r == ',' || r == ' ' })
	switch {
	case len(names) == 0:
		return upstreamsuite.Releases[:1], nil
	case len(names) == 1 && names[0] == "all":
		return upstreamsuite.Releases, nil
	}
	var out []upstreamsuite.Release
	var known []string
	for _, r := range upstreamsuite.Releases {
		known = append(known, r.Minor)
	}
	for _, name := range names {
		i := slices.IndexFunc(upstreamsuite.Releases, func(r upstreamsuite.Release) bool { return r.Minor == name })
		if i < 0 {
			return nil, fmt.Errorf("no release of the suite for Kubernetes %q: it runs at %s", name, strings.Join(known, ", "))
		}
		out = append(out, upstreamsuite.Releases[i])
	}
	return out, nil
}

// runRelease runs one release's suite and prints every case and a summary;
// it reports whether every case passed and the suite had want cases.
func runRelease(opts upstreamsuite.Options, want int) (passed, failed int, ok bool) {
	rep, err := upstreamsuite.Run(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstreamsuite: %s: %v\n", opts.Release.Module, err)
		return 0, max(want, 1), false
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
	fmt.Printf("\nslowest case, best of %d runs: %s, %.3f ms\n", max(opts.Count, 1), best.Name, ms(best.Dractl))
	fmt.Printf("slowest case, first run (CEL compiled cold): %s, %.3f ms\n", first.Name, ms(first.First))
	ok = failed == 0 && skipped == 0 && len(rep.Cases) == want
	if len(rep.Cases) != want {
		fmt.Printf("the suite has %d cases, expected %d\n", len(rep.Cases), want)
	}
	if skipped > 0 {
		fmt.Printf("%d cases skipped: every case must run\n", skipped)
	}
	failed += skipped + max(want-len(rep.Cases), 0)
	fmt.Printf("%s: %d passed, %d failed\n", opts.Release.Module, passed, failed)
	return passed, failed, ok
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
