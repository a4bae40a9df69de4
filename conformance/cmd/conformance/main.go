// Command conformance runs dractl's allocator and upstream's
// (k8s.io/dynamic-resource-allocation/structured, experimental variant)
// side by side on generated scenarios, verifies every result and writes
// each disagreement, shrunk, as a regression file.
//
//	go -C conformance run ./cmd/conformance -n 2000 -seed 1
//	go -C conformance run ./cmd/conformance -replay ../pkg/core/allocator/testdata/regressions
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dractl/dractl/conformance/diff"
	"github.com/dractl/dractl/conformance/dractlrun"
	"github.com/dractl/dractl/conformance/gen"
	"github.com/dractl/dractl/conformance/scenario"
)

func main() {
	n := flag.Int("n", 2000, "number of scenarios")
	seed := flag.Int64("seed", 1, "seed")
	start := flag.Int("start", 0, "index of the first scenario")
	jobs := flag.Int("j", runtime.GOMAXPROCS(0), "parallel workers")
	timeout := flag.Duration("timeout", 3*time.Second, "timeout of one Allocate call")
	outDir := flag.String("out", "../pkg/core/allocator/testdata/regressions", "directory for shrunk failing scenarios")
	maxFiles := flag.Int("max-files", 25, "write at most this many regression files per run")
	perSig := flag.Int("per-signature", 3, "write at most this many regression files per kind of disagreement")
	budget := flag.Int("shrink", 400, "shrink budget (evaluations) per failure")
	replay := flag.String("replay", "", "file or directory of scenario YAML files to run instead of generating")
	verbose := flag.Bool("v", false, "print every scenario")
	showTimeouts := flag.Bool("timeouts", true, "print a TIMEOUT line per node where either side timed out, with both times")
	slow := flag.Duration("shrink-slow", 0, "when > 0, shrink every node where dractl timed out or took longer than this while dractl alone still does, and write it to -slow-out")
	reportSlow := flag.Duration("report-slow", 0, "when > 0, also print a SLOWCALL line per node where dractl took longer than this (without timing out)")
	slowOut := flag.String("slow-out", "testdata/slow", "directory for shrunk scenarios where dractl is slow")
	flag.Parse()

	opts := diff.Options{Timeout: *timeout, NoDractl: !dractlrun.Available}
	if opts.NoDractl {
		fmt.Println("pkg/core/allocator not compiled in (-tags noallocator): verifying upstream only")
	}
	ctx := context.Background()
	began := time.Now()

	type job struct {
		name string
		sc   func() (*scenario.Scenario, error)
	}
	var work []job
	if *replay != "" {
		files := []string{*replay}
		if st, err := os.Stat(*replay); err == nil && st.IsDir() {
			files, _ = filepath.Glob(filepath.Join(*replay, "*.yaml"))
			sort.Strings(files)
		}
		for _, f := range files {
			work = append(work, job{f, func() (*scenario.Scenario, error) { return scenario.ReadFile(f) }})
		}
	} else {
		for i := *start; i < *start+*n; i++ {
			work = append(work, job{fmt.Sprintf("seed%d-%d", *seed, i), func() (*scenario.Scenario, error) { return gen.Generate(*seed, i), nil }})
		}
	}

	var (
		mu                                   sync.Mutex
		passed, failed, files                int
		nodeRuns, agree, fits, sameFits, tmo int
		drTmo, drBeatUp                      int
		kinds                                = map[string]int{}
		sigs                                 = map[string]int{}
		upViolations                         int
		slowNodes                            []slowNode
	)
	ch := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < *jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				sc, err := j.sc()
				if err != nil {
					mu.Lock()
					failed++
					fmt.Printf("ERROR %s: %v\n", j.name, err)
					mu.Unlock()
					continue
				}
				res, err := diff.Run(ctx, sc, "", opts)
				if err != nil {
					mu.Lock()
					failed++
					fmt.Printf("ERROR %s: %v\n", j.name, err)
					mu.Unlock()
					continue
				}
				var bad *diff.NodeResult
				mu.Lock()
				for i := range res {
					r := &res[i]
					nodeRuns++
					kinds["upstream "+string(r.Upstream.Kind)]++
					if !opts.NoDractl {
						kinds["dractl "+string(r.Dractl.Kind)]++
					}
					if r.Upstream.Kind == scenario.Timeout {
						tmo++
					}
					if r.Dractl.Kind == scenario.Timeout {
						drTmo++
					}
					if r.Upstream.Kind == scenario.Timeout && r.Dractl.Kind != scenario.Timeout && !opts.NoDractl {
						drBeatUp++
					}
					if *showTimeouts && (r.Upstream.Kind == scenario.Timeout || r.Dractl.Kind == scenario.Timeout) {
						fmt.Println(timeoutLine(j.name, r, opts))
					}
					if *reportSlow > 0 && r.Dractl.Kind != scenario.Timeout && r.DractlTime > *reportSlow {
						fmt.Printf("SLOWCALL %s %s: dractl answered %s in %.1f ms (upstream %s in %.1f ms)\n", j.name, r.Node, r.Dractl.Kind,
							float64(r.DractlTime.Microseconds())/1000, r.Upstream.Kind, float64(r.UpstreamTime.Microseconds())/1000)
					}
					if *slow > 0 && (r.Dractl.Kind == scenario.Timeout || r.DractlTime > *slow) {
						slowNodes = append(slowNodes, slowNode{sc, r.Node})
					}
					if r.Signature == "" {
						agree++
					} else if bad == nil {
						bad = r
					}
					if r.Upstream.Kind == scenario.Fit && r.Dractl.Kind == scenario.Fit {
						fits++
						if r.SameDevices {
							sameFits++
						}
					}
					if len(r.UpstreamViolations) > 0 {
						upViolations++
						fmt.Printf("VERIFIER %s %s: upstream result fails verification: %s\n", sc.Name, r.Node, strings.Join(r.UpstreamViolations, "; "))
					}
				}
				if *verbose {
					for _, r := range res {
						fmt.Printf("%s %s: upstream %s | dractl %s\n", sc.Name, r.Node, r.Upstream, r.Dractl)
					}
				}
				if bad == nil {
					passed++
					mu.Unlock()
					continue
				}
				failed++
				sigs[bad.Signature]++
				write := files < *maxFiles && *replay == "" && sigs[bad.Signature] <= *perSig
				if write {
					files++
				}
				mu.Unlock()
				line := fmt.Sprintf("FAIL %s %s: %s — %s", sc.Name, bad.Node, bad.Signature, oneLine(bad.Detail, 300))
				if write {
					small := diff.Shrink(ctx, sc, bad.Node, bad.Signature, opts, *budget)
					path, err := writeRegression(*outDir, small, bad.Node, bad.Signature, opts)
					if err != nil {
						line += " (write: " + err.Error() + ")"
					} else {
						line += " -> " + path
					}
				}
				mu.Lock()
				fmt.Println(line)
				mu.Unlock()
			}
		}()
	}
	for _, j := range work {
		ch <- j
	}
	close(ch)
	wg.Wait()

	for _, sn := range slowNodes {
		small := diff.ShrinkWhile(sn.sc, sn.node, *budget, func(c *scenario.Scenario) bool {
			return diff.DractlSlow(ctx, c, sn.node, *slow)
		})
		// The shrunk scenario is small enough that upstream usually
		// answers given time; its answer is the regression's expectation.
		// The search budget is loose: tighten it to about twice what
		// Allocator.Stats reports once the search is fixed.
		path, err := writeRegression(*slowOut, small, sn.node, "dractl slow", diff.Options{Timeout: 20 * *timeout}, "expect-max-nodes: 100000")
		if err != nil {
			fmt.Printf("SLOW %s %s: %v\n", sn.sc.Name, sn.node, err)
		} else {
			fmt.Printf("SLOW %s %s -> %s\n", sn.sc.Name, sn.node, path)
		}
	}

	el := time.Since(began).Round(time.Millisecond)
	var ks []string
	for k, v := range kinds {
		ks = append(ks, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(ks)
	fmt.Printf("outcomes: %s\n", strings.Join(ks, " "))
	for s, c := range sigs {
		fmt.Printf("disagreement %q: %d scenarios\n", s, c)
	}
	if nodeRuns > 0 {
		fmt.Printf("node runs: %d, agreement %.2f%% (%d/%d), first-fit identical devices %d/%d, upstream timeouts %d, upstream results failing the verifier %d, %s on %d workers\n",
			nodeRuns, 100*float64(agree)/float64(nodeRuns), agree, nodeRuns, sameFits, fits, tmo, upViolations, el, *jobs)
	}
	if !opts.NoDractl {
		fmt.Printf("timeouts: dractl %d, upstream %d; dractl answered where upstream timed out: %d\n", drTmo, tmo, drBeatUp)
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 || upViolations > 0 {
		os.Exit(1)
	}
}

type slowNode struct {
	sc   *scenario.Scenario
	node string
}

// timeoutLine names a node where either side gave up and how long the
// other one took: a dractl answer where upstream timed out is a result, a
// dractl timeout is a search to prune.
func timeoutLine(name string, r *diff.NodeResult, opts diff.Options) string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	switch {
	case opts.NoDractl:
		return fmt.Sprintf("TIMEOUT %s %s: upstream timed out after %s", name, r.Node, ms(r.UpstreamTime))
	case r.Dractl.Kind == scenario.Timeout && r.Upstream.Kind == scenario.Timeout:
		return fmt.Sprintf("TIMEOUT %s %s: both timed out (dractl %s, upstream %s)", name, r.Node, ms(r.DractlTime), ms(r.UpstreamTime))
	case r.Dractl.Kind == scenario.Timeout:
		return fmt.Sprintf("TIMEOUT %s %s: dractl timed out after %s, upstream answered %s in %s", name, r.Node, ms(r.DractlTime), r.Upstream.Kind, ms(r.UpstreamTime))
	}
	return fmt.Sprintf("TIMEOUT %s %s: dractl answered %s in %s where upstream timed out", name, r.Node, r.Dractl.Kind, ms(r.DractlTime))
}

func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// writeRegression re-runs the shrunk scenario and writes it with the
// expected (upstream) outcome in the header.
func writeRegression(dir string, sc *scenario.Scenario, node, sig string, opts diff.Options, extra ...string) (string, error) {
	res, err := diff.Run(context.Background(), sc, node, opts)
	if err != nil || len(res) != 1 {
		return "", fmt.Errorf("re-run: %v", err)
	}
	r := res[0]
	slug := strings.NewReplacer(" ", "-", "=", "-", ";", "", "/", "-").Replace(sig)
	path := filepath.Join(dir, sc.Name+"-"+slug+".yaml")
	header := []string{
		"Regression found by conformance (dractl vs k8s.io/dynamic-resource-allocation v0.37.2 structured, experimental variant, all features).",
		"scenario: " + sc.Name,
		"node: " + node,
		"disagreement: " + sig,
		"expected (upstream): " + r.Upstream.String(),
		"dractl: " + r.Dractl.String(),
	}
	// Machine-readable expectation for pkg/core/allocator's regression test:
	// "expect: <fit|unfit|fatal>" and, for fit, the devices per claim as
	// scenario.DescribeResults renders them.
	header = append(header, "expect-node: "+node, "expect: "+string(r.Upstream.Kind))
	if r.Upstream.Kind == scenario.Timeout {
		return "", fmt.Errorf("upstream timed out on the shrunk scenario too; no expectation to write")
	}
	if r.Upstream.Kind == scenario.Fit {
		header = append(header, "expect-devices: "+scenario.DescribeResults(r.Upstream.Results))
	}
	header = append(header, extra...)
	if r.Detail != "" {
		header = append(header, "detail: "+oneLine(r.Detail, 2000))
	}
	header = append(header,
		"Slices are written as dractl reads them (mixins kept); upstream gets api.ToUpstream.",
		"Claims with status.allocation are already allocated; the others are allocated together, in file order.",
		"replay: go -C conformance run ./cmd/conformance -replay "+path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return path, sc.WriteFile(path, header)
}
