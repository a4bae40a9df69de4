package e2e

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dractl/dractl/e2e/framework"
)

var (
	startupPods = flag.Int("startup-pods", 100, "pods per cell (scheduler and pod kind) of BenchmarkPodStartup")
	startupDocs = flag.String("startup-docs", "", "if set, the start-up table replaces its section of this Markdown file")
)

const (
	startupBegin = "<!-- startup:begin (make bench-startup rewrites this section) -->"
	startupEnd   = "<!-- startup:end -->"
	// wholeGPUClass is deploy/driver's class of whole GPUs.
	wholeGPUClass = "gpu.dractl.dev"
	// startupGoal is how many times a no-claim pod's start-up a DRA
	// pod's may take on the same node.
	startupGoal = 1.5
)

// startupKind is a kind of pod the start-up benchmark creates.
type startupKind struct {
	name string
	// template is the ResourceClaimTemplate of the pod's one claim; ""
	// for a pod without claims.
	template string
}

var startupKinds = []startupKind{
	{"MIG 1g.5gb (made at prepare)", "startup-mig"},
	{"whole GPU", "startup-gpu"},
	{"no claims", ""},
}

// startupCell is one row of the table: pods of a kind under a scheduler
// profile.
type startupCell struct {
	profile string
	kind    startupKind
}

func startupCells() []startupCell {
	var cells []startupCell
	for _, p := range []string{dractlProfile, stockProfile} {
		for _, k := range startupKinds {
			cells = append(cells, startupCell{p, k})
		}
	}
	return cells
}

func (c startupCell) scheduler() string {
	if c.profile == stockProfile {
		return "stock"
	}
	return "dractl"
}

// startupSample is one pod's start-up, each time counted from just
// before the client sent its create request: when the watch saw it
// bound to the node, when the watch saw it Running with its containers
// ready, and containerd's timestamp of the container's first output line
// (the kubelet's pod log file, read through kube-apiserver's log
// endpoint with timestamps).
type startupSample struct {
	bound, running, firstLine time.Duration
}

// BenchmarkPodStartup measures pod start-up on a real node
// (framework.Node: containerd, runc and the kubelet) with
// dractl-gpu-driver on two mock A100 GPUs, scheduled by one
// dractl-scheduler with two profiles (config-two-profiles.yaml): stock
// kube-scheduler's default profile with its DynamicResources plugin, and
// dractl's. Pods of three kinds (a claim of a MIG device the driver makes
// at prepare, a claim of a whole GPU, no claim; claims from templates, as
// workloads have them) run one at a time, the six cells taking turns in
// an order that shifts every round, after a first round not counted
// (images and code paths warm). Each pod is deleted and its claim
// released before the next is created, so that no pod waits for another.
func BenchmarkPodStartup(b *testing.B) {
	cp, n, _ := startGPUNode(b)
	createTemplate(b, cp, "startup-mig", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", migClass1g, 1)}})
	createTemplate(b, cp, "startup-gpu", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", wholeGPUClass, 1)}})

	cells := startupCells()
	samples := map[startupCell][]startupSample{}
	load0 := loadAverage()
	start := time.Now()
	pod := 0
	for range b.N {
		for round := range *startupPods + 1 {
			for j := range cells {
				c := cells[(round+j)%len(cells)]
				s := startPod(b, cp, n, c, fmt.Sprintf("startup-%d", pod))
				pod++
				if round > 0 {
					samples[c] = append(samples[c], s)
				}
			}
		}
	}
	r := startupReport{cells: cells, samples: samples,
		header: fmt.Sprintf("`make bench-startup` (STARTUP_PODS=%d) on %d CPUs (%s/%s), %s UTC, %s for %d pods; load average %s at the start, %s at the end.",
			*startupPods, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, start.UTC().Format("2006-01-02 15:04"),
			time.Since(start).Round(time.Second), pod, load0, loadAverage())}
	for _, c := range cells {
		sum := summarize(samples[c])
		name := strings.ReplaceAll(c.scheduler()+"-"+c.kind.name, " ", "-")
		b.ReportMetric(sum.running.p50.Seconds(), name+"-running-p50-s")
		b.ReportMetric(sum.firstLine.p50.Seconds(), name+"-first-line-p50-s")
	}
	table := r.String()
	fmt.Println(table)
	if *startupDocs != "" {
		if err := replaceSection(*startupDocs, startupBegin, startupEnd, table); err != nil {
			b.Fatal(err)
		}
	}
}

// startPod creates a pod of the cell on the node, times it until its
// container's first line and checks that the container sees its devices
// (or none), then deletes it and waits until its claim is released.
func startPod(b testing.TB, cp *framework.ControlPlane, n *gpuNode, c startupCell, name string) startupSample {
	b.Helper()
	var templates []string
	if c.kind.template != "" {
		templates = []string{c.kind.template}
	}
	pod := devicePod(name, c.profile, n.name, templates, "c")
	pod.Spec.Containers[0].Command = shellContainer("c", "echo started\n"+deviceScript).Command

	ctx, cancel := context.WithTimeout(cp.Context(), 2*time.Minute)
	defer cancel()
	w, err := cp.Client.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	if _, err := cp.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var s startupSample
	for s.running == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("the watch of pod %s ended before it ran", name)
			}
			at := time.Since(created)
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				b.Fatalf("watching pod %s: %v", name, ev.Object)
			}
			if s.bound == 0 && p.Spec.NodeName != "" {
				s.bound = at
			}
			if p.Status.Phase == corev1.PodRunning && containersReady(p) {
				s.running = at
			}
		case <-ctx.Done():
			b.Fatalf("pod %s (%s, %s) did not run within 2 minutes", name, c.scheduler(), c.kind.name)
		}
	}

	var out string
	waitFor(b, 2*time.Minute, "the output of "+name, func(ctx context.Context) (bool, error) {
		data, err := cp.Client.CoreV1().Pods(pod.Namespace).GetLogs(name, &corev1.PodLogOptions{Container: "c", Timestamps: true}).DoRaw(ctx)
		out = string(data)
		return err == nil && strings.HasSuffix(out, " done\n"), nil
	})
	first, text, err := firstLineAt(out)
	if err != nil {
		b.Fatalf("pod %s: %v", name, err)
	}
	s.firstLine = first.Sub(created)
	seen := parseDevices(b, text)
	if claims := c.kind.template != ""; claims != (len(seen.nodes) > 0 && len(seen.env) > 0) {
		b.Fatalf("pod %s (%s) sees %v", name, c.kind.name, seen)
	}

	var claim *resourcev1.ResourceClaim
	if c.kind.template != "" {
		claim = claimOf(b, cp, name)
	}
	deleteAndWait(b, cp, pod)
	if claim != nil {
		released(b, cp, claim)
	}
	return s
}

func containersReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// firstLineAt reads a container's log as the log endpoint returns it
// with timestamps (each line "<RFC 3339 time> <text>"): the time of its
// first line, and the text without the timestamps.
func firstLineAt(log string) (time.Time, string, error) {
	var first time.Time
	var text strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		ts, rest, ok := strings.Cut(line, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			return time.Time{}, "", fmt.Errorf("log line %d %q has no timestamp", i+1, line)
		}
		if i == 0 {
			first = t
		}
		text.WriteString(rest + "\n")
	}
	if first.IsZero() {
		return time.Time{}, "", fmt.Errorf("empty log")
	}
	return first, text.String(), nil
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// percentiles are the p50 and p99 of a measure.
type percentiles struct{ p50, p99 time.Duration }

// startupSummary is a cell's percentiles of each measure; node is the
// node's part, from bound to Running.
type startupSummary struct {
	n                               int
	bound, running, firstLine, node percentiles
}

func summarize(samples []startupSample) startupSummary {
	of := func(f func(startupSample) time.Duration) percentiles {
		var ds []time.Duration
		for _, s := range samples {
			ds = append(ds, f(s))
		}
		slices.Sort(ds)
		return percentiles{nearestRank(ds, 0.5), nearestRank(ds, 0.99)}
	}
	return startupSummary{
		n:         len(samples),
		bound:     of(func(s startupSample) time.Duration { return s.bound }),
		running:   of(func(s startupSample) time.Duration { return s.running }),
		firstLine: of(func(s startupSample) time.Duration { return s.firstLine }),
		node:      of(func(s startupSample) time.Duration { return s.running - s.bound }),
	}
}

// nearestRank is the q-quantile of sorted durations by the nearest-rank
// method: the smallest of them with at least a fraction q of all at or
// below it; 0 for none.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// startupReport renders the benchmark's section of docs/performance.md.
type startupReport struct {
	header  string
	cells   []startupCell
	samples map[startupCell][]startupSample
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a.Seconds() / b.Seconds()
}

func (r startupReport) String() string {
	sums := map[startupCell]startupSummary{}
	for _, c := range r.cells {
		sums[c] = summarize(r.samples[c])
	}
	noClaims := func(c startupCell) startupSummary { return sums[startupCell{c.profile, startupKind{"no claims", ""}}] }
	stock := func(c startupCell) startupSummary { return sums[startupCell{stockProfile, c.kind}] }

	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## Pod start-up on a real node\n\n%s\n\n", startupBegin, r.header)
	b.WriteString("Times from the pod's create request, in seconds: bound (the watch sees `spec.nodeName`), Running (the watch sees the\n")
	b.WriteString("phase Running and ContainersReady), first line (containerd's timestamp of the container's first output line), node\n")
	b.WriteString("(bound to Running: the kubelet's part, prepare included). Ratios are of p50s: against the no-claim pod under the\n")
	b.WriteString("same profile (×no-claim), and dractl's profile against stock's for the same kind of pod (dractl/stock).\n\n")
	b.WriteString("| scheduler | pod | n | bound p50 | node p50 | Running p50 | Running p99 | first line p50 | first line p99 | ×no-claim Running / first line | dractl/stock Running / first line |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	worstClaim, worstStock := 0.0, 0.0
	for _, c := range r.cells {
		s := sums[c]
		vsNone, vsStock := "—", "—"
		if c.kind.template != "" {
			nc := noClaims(c)
			run, line := ratio(s.running.p50, nc.running.p50), ratio(s.firstLine.p50, nc.firstLine.p50)
			vsNone = fmt.Sprintf("%.2f / %.2f", run, line)
			worstClaim = max(worstClaim, run, line)
		}
		if c.profile == dractlProfile {
			st := stock(c)
			run, line := ratio(s.running.p50, st.running.p50), ratio(s.firstLine.p50, st.firstLine.p50)
			vsStock = fmt.Sprintf("%.2f / %.2f", run, line)
			// A pod without claims is no DRA plugin's work: its ratio
			// is the machine's noise, shown but not judged.
			if c.kind.template != "" {
				worstStock = max(worstStock, run, line)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", c.scheduler(), c.kind.name, s.n,
			s.bound.p50.Seconds(), s.node.p50.Seconds(), s.running.p50.Seconds(), s.running.p99.Seconds(),
			s.firstLine.p50.Seconds(), s.firstLine.p99.Seconds(), vsNone, vsStock)
	}
	fmt.Fprintf(&b, "\n- A DRA pod's start-up within %.1f× a no-claim pod's (p50, both measures, each profile): %s (worst %.2f×).\n",
		startupGoal, metOr(worstClaim <= startupGoal), worstClaim)
	fmt.Fprintf(&b, "- dractl's profile never slower than stock's (p50, both measures, each kind of pod with a claim): %s (worst %.2f×).\n",
		metOr(worstStock <= 1), worstStock)
	b.WriteString(startupEnd + "\n")
	return b.String()
}

func metOr(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func TestNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{ds, 0.5, 50 * time.Millisecond},
		{ds, 0.99, 99 * time.Millisecond},
		{ds, 1, 100 * time.Millisecond},
		{ds[:10], 0.99, 10 * time.Millisecond},
		{ds[:3], 0.5, 2 * time.Millisecond},
		{ds[:1], 0.99, time.Millisecond},
		{nil, 0.5, 0},
	} {
		if got := nearestRank(tc.ds, tc.q); got != tc.want {
			t.Errorf("nearestRank(%d durations, %v) = %v, want %v", len(tc.ds), tc.q, got, tc.want)
		}
	}
}

func TestFirstLineAt(t *testing.T) {
	log := "2026-12-02T01:30:00.123456789Z started\n2026-12-02T01:30:00.2Z dev /dev/nvidia0 c3:0\n2026-12-02T01:30:00.3Z done\n"
	first, text, err := firstLineAt(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 2, 1, 30, 0, 123456789, time.UTC); !first.Equal(want) {
		t.Errorf("first line at %v, want %v", first, want)
	}
	if want := "started\ndev /dev/nvidia0 c3:0\ndone\n"; text != want {
		t.Errorf("text %q, want %q", text, want)
	}
	for _, bad := range []string{"", "started\n", "2026-12-02 started\n"} {
		if _, _, err := firstLineAt(bad); err == nil {
			t.Errorf("firstLineAt(%q) found a first line", bad)
		}
	}
}

// TestStartupReport renders the table from made-up samples: percentiles
// per cell, the ratios against the no-claim pod and against stock, and
// the goals judged on them.
func TestStartupReport(t *testing.T) {
	s := func(bound, running, line int) startupSample {
		ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
		return startupSample{ms(bound), ms(running), ms(line)}
	}
	cells := startupCells()
	samples := map[startupCell][]startupSample{}
	for _, c := range cells {
		for i := range 10 {
			// Running at 1.0 s for a pod without claims, 1.4 s with one
			// under dractl, 1.6 s under stock; the last of ten 3 s late.
			run := 1000
			switch {
			case c.kind.template != "" && c.profile == dractlProfile:
				run = 1400
			case c.kind.template != "":
				run = 1600
			}
			if i == 9 {
				run += 3000
			}
			samples[c] = append(samples[c], s(100, run, run+100))
		}
	}
	got := startupReport{header: "made up.", cells: cells, samples: samples}.String()
	for _, want := range []string{
		"| dractl | MIG 1g.5gb (made at prepare) | 10 | 0.10 | 1.30 | 1.40 | 4.40 | 1.50 | 4.50 | 1.40 / 1.36 | 0.87 / 0.88 |",
		"| dractl | no claims | 10 | 0.10 | 0.90 | 1.00 | 4.00 | 1.10 | 4.10 | — | 1.00 / 1.00 |",
		"| stock | whole GPU | 10 | 0.10 | 1.50 | 1.60 | 4.60 | 1.70 | 4.70 | 1.60 / 1.55 | — |",
		"within 1.5× a no-claim pod's (p50, both measures, each profile): **not met** (worst 1.60×)",
		"never slower than stock's (p50, both measures, each kind of pod with a claim): **met** (worst 0.88×)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasPrefix(got, startupBegin+"\n") || !strings.HasSuffix(got, startupEnd+"\n") {
		t.Errorf("the report is not between the section's markers:\n%s", got)
	}
}
