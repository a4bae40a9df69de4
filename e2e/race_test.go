package e2e

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	migtables "github.com/dractl/dractl/pkg/driver/mig"
	schedapp "github.com/dractl/dractl/scheduler/app"
)

var (
	schedulerBinary = flag.String("scheduler", "../bin/dractl-scheduler", "the dractl-scheduler binary the race runs (make scheduler)")
	raceQPS         = flag.Int("race-qps", 1000, "client QPS and burst of the scheduler in the race (the same for both profiles)")
	raceScale       = flag.Float64("race-scale", 1, "scales node and pod counts of every race workload (0.1 for a quick look)")
	raceOnly        = flag.String("race-only", "", "run only the race workloads whose name contains this")
	raceDocs        = flag.String("race-docs", "", "if set, the race table replaces its section of this Markdown file")
	raceProfiles    = flag.String("race-profiles", stockProfile+","+dractlProfile, "the scheduler profiles raced, comma-separated (one alone, for a long row)")
	raceRuns        = flag.Int("race-runs", 1, "runs per row and profile, the profiles taking turns; the table shows each profile's run with the median CPU per pod")
	raceProfile     = flag.String("race-profile", "", "if set, a directory for CPU profiles of the scheduler per row and profile: <row>.<profile>.cpu.0 until the first bind, .1 until every pod is bound, .2 the shutdown")
)

// raceWorkload is one row pair of the race: the same cluster and pods,
// once for each profile.
type raceWorkload struct {
	name      string
	nodes     int
	pods      int
	mig       bool // DGX H100 nodes; else 8 plain devices per node
	full      int  // 1g.10gb placements already allocated per node
	templates bool // pods' claims come from a template (resourceclaim controller)
	mix       bool // each claim: 4 MIG requests on one GPU (matchAttribute)
	// floor: the same cluster, and pods without claims: what
	// kube-scheduler itself costs for them (start-up with every slice and
	// class to decode, and a scheduling cycle and binding per pod), which
	// no DRA plugin can take away. DRA plugins skip such pods, so the row
	// runs in one profile (dractl's when raced).
	floor bool
}

func raceWorkloads() []raceWorkload {
	return []raceWorkload{
		{name: "plain, 100 nodes × 8 devices", nodes: 100, pods: 400},
		{name: "plain, 500 nodes × 8 devices", nodes: 500, pods: 2000},
		{name: "MIG, 100 8×H100 nodes, 1g.10gb", nodes: 100, pods: 400, mig: true},
		{name: "MIG, 100 8×H100 nodes, no claims (kube-scheduler's floor)", nodes: 100, pods: 400, mig: true, floor: true},
		{name: "MIG, 500 8×H100 nodes, 1g.10gb", nodes: 500, pods: 2000, mig: true},
		{name: "MIG, 100 nodes 90 % full, 1g.10gb", nodes: 100, pods: 400, mig: true, full: 52},
		{name: "MIG, 100 nodes, 1g.10gb from claim templates", nodes: 100, pods: 400, mig: true, templates: true},
		{name: "MIG, 100 nodes, 4-request matchAttribute mix", nodes: 100, pods: 400, mig: true, mix: true},
	}
}

// raceResult is what one profile achieved on one workload.
type raceResult struct {
	profile     string
	bound, pods int
	wall        time.Duration
	cpu         time.Duration // the scheduler process's user+system time
	// cpuAtFirst is cpu when the first pod was seen bound: start-up,
	// informer sync and the first cycles, which both profiles pay alike.
	cpuAtFirst time.Duration
	p50, p99   time.Duration // scheduling attempt duration (the scheduler's histogram)
	// startToFirst, boundP50 and boundP99 are how long after the
	// scheduler started the first pod, half of them and 99 % were bound:
	// the latency a pod's owner sees, since every pod was pending from
	// the start.
	startToFirst, boundP50, boundP99 time.Duration
	// lastBound is when the last pod seen bound was.
	lastBound  time.Duration
	violations int
}

// BenchmarkRace races stock kube-scheduler's DynamicResources plugin
// against dractl's, both in one dractl-scheduler binary
// (deploy/scheduler/config-two-profiles.yaml), run as its own process so
// that its CPU time is its own; etcd and kube-apiserver run in this
// process. Per workload and profile: a fresh control plane, Nodes without
// kubelets, slices, classes, claims and pods created first, then the
// scheduler started with the same client QPS and burst; the clock stops
// when every pod is bound. It prints the table and, with -race-docs,
// writes it into docs/performance.md.
func BenchmarkRace(b *testing.B) {
	if _, err := os.Stat(*schedulerBinary); err != nil {
		b.Fatalf("the race runs the dractl-scheduler binary: %v (make scheduler)", err)
	}
	var rows, spreads []string
	var runs []raceRun
	for _, w := range raceWorkloads() {
		if *raceOnly != "" && !strings.Contains(w.name, *raceOnly) {
			continue
		}
		w.nodes = max(1, int(math.Round(float64(w.nodes)**raceScale)))
		w.pods = max(1, int(math.Round(float64(w.pods)**raceScale)))
		var all []raceResult
		for range max(1, *raceRuns) {
			for _, profile := range w.profiles() {
				b.Run(w.name+"/"+profile, func(b *testing.B) {
					for range b.N {
						all = append(all, runRace(b, w, profile))
					}
				})
			}
		}
		results, spread := medianRuns(all)
		if spread != "" {
			spreads = append(spreads, fmt.Sprintf("- %s: %s", w.name, spread))
		}
		rows = append(rows, raceRows(w, results)...)
		runs = append(runs, raceRun{w, results})
	}
	var floor *raceRun
	for i, r := range runs {
		if r.w.floor && len(r.results) > 0 {
			floor = &runs[i]
		}
	}
	var aboveFloor []string
	for _, r := range runs {
		if floor == nil || r.w.floor || !r.w.sameCluster(floor.w) {
			continue
		}
		if line := r.w.aboveFloor(r.results, floor.results[0].cpuPerPod()); line != "" {
			aboveFloor = append(aboveFloor, line)
		}
	}
	table := raceTable(rows, aboveFloor, migAgainstPlain(runs), spreads)
	fmt.Println(table)
	if *raceDocs != "" {
		if err := replaceSection(*raceDocs, raceBegin, raceEnd, table); err != nil {
			b.Fatal(err)
		}
	}
}

// profiles are the scheduler profiles the workload is raced in.
func (w raceWorkload) profiles() []string {
	ps := strings.Split(*raceProfiles, ",")
	if !w.floor {
		return ps
	}
	if slices.Contains(ps, dractlProfile) {
		return []string{dractlProfile}
	}
	return ps[:1]
}

func runRace(b *testing.B, w raceWorkload, profile string) raceResult {
	var comps []framework.Component
	if w.templates {
		comps = append(comps, framework.ResourceClaimController{})
	}
	cp := framework.StartControlPlane(b, framework.Options{Components: comps})
	cfg := cp.ClientConfig("race-setup")
	cfg.QPS, cfg.Burst = 2000, 2000
	client := kubernetes.NewForConfigOrDie(cfg)
	populate(b, cp, client, w, profile)

	// Count bindings through a watch, not by listing (the apiserver shares
	// the cores with the scheduler).
	var boundCount atomic.Int64
	boundAt := make([]atomic.Int64, w.pods) // Unix nanoseconds, in the order seen
	factory := informers.NewSharedInformerFactory(client, 0)
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if old.(*corev1.Pod).Spec.NodeName == "" && cur.(*corev1.Pod).Spec.NodeName != "" {
				if i := boundCount.Add(1) - 1; i < int64(len(boundAt)) {
					boundAt[i].Store(time.Now().UnixNano())
				}
			}
		},
	})
	factory.Start(cp.Context().Done())
	factory.WaitForCacheSync(cp.Context().Done())

	sched := startSchedulerProcess(b, cp, *raceQPS, profilePrefix(b, w, profile))
	start := time.Now()
	deadline := start.Add(time.Duration(w.pods)*time.Second/2 + 5*time.Minute)
	var cpuAtFirst time.Duration
	for boundCount.Load() < int64(w.pods) && time.Now().Before(deadline) && sched.running() {
		if cpuAtFirst == 0 && boundCount.Load() > 0 {
			cpuAtFirst = sched.cpu()
			sched.nextProfile()
		}
		time.Sleep(100 * time.Millisecond)
	}
	wall := time.Since(start)
	sched.nextProfile()
	res := raceResult{profile: profile, bound: int(boundCount.Load()), pods: w.pods, wall: wall, cpu: sched.cpu(), cpuAtFirst: cpuAtFirst}
	// The q-quantile of the time to bind over all of the row's pods; 0
	// if that many were not bound.
	boundBy := func(q float64) time.Duration {
		if rank := max(0, int(math.Ceil(q*float64(w.pods)))-1); rank < res.bound {
			return time.Unix(0, boundAt[rank].Load()).Sub(start)
		}
		return 0
	}
	res.startToFirst = boundBy(0)
	res.boundP50, res.boundP99 = boundBy(0.5), boundBy(0.99)
	if res.bound > 0 {
		res.lastBound = time.Unix(0, boundAt[min(res.bound, w.pods)-1].Load()).Sub(start)
	}
	res.p50, res.p99 = sched.attemptQuantiles(b, profile)
	sched.stop()
	problems, err := framework.CheckAllocations(context.Background(), client)
	if err != nil {
		b.Fatal(err)
	}
	res.violations = len(problems)
	if len(problems) > 0 {
		b.Errorf("%s, %s: %s", w.name, profile, framework.FormatProblems(problems))
	}
	if res.bound < w.pods {
		b.Errorf("%s, %s: %d of %d pods bound in %s", w.name, profile, res.bound, w.pods, wall.Round(time.Second))
	}
	b.ReportMetric(res.podsPerSec(), "pods/s")
	b.ReportMetric(float64(res.cpu.Milliseconds())/float64(max(1, res.bound)), "CPU-ms/pod")
	return res
}

// populate creates the workload's objects with several writers.
func populate(b *testing.B, cp *framework.ControlPlane, client kubernetes.Interface, w raceWorkload, profile string) {
	ctx := cp.Context()
	var nodes []string
	for i := range w.nodes {
		nodes = append(nodes, fmt.Sprintf("node-%03d", i))
	}
	parallel(b, len(nodes), func(i int) error { return createNode(ctx, client, nodes[i]) })
	var slices []*resourcev1.ResourceSlice
	class := "plain"
	for _, node := range nodes {
		if w.mig {
			n := examplegen.DGXH100Node
			n.Node = node
			n.GPUsPerSlice = 0
			for _, s := range n.Slices(examplegen.Flat) {
				v, err := api.ToUpstream(s)
				if err != nil {
					b.Fatal(err)
				}
				slices = append(slices, v)
			}
			class = "mig.nvidia.com"
		} else {
			slices = append(slices, plainSlice(node, 1, devNames(8)...))
		}
	}
	parallel(b, len(slices), func(i int) error {
		_, err := client.ResourceV1().ResourceSlices().Create(ctx, slices[i], metav1.CreateOptions{})
		return err
	})
	if w.mig {
		for _, c := range examplegen.NVIDIAClasses() {
			if _, err := client.ResourceV1().DeviceClasses().Create(ctx, c.(*resourcev1.DeviceClass), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		plainClass(b, cp)
	}
	// Already allocated claims: the first w.full 1g.10gb placements of
	// every node, GPU by GPU.
	if w.full > 0 {
		type held struct{ node, device string }
		var hs []held
		for _, node := range nodes {
			for k := range w.full {
				hs = append(hs, held{node, migtables.MIGDeviceName(k/7, "1g.10gb", k%7)})
			}
		}
		parallel(b, len(hs), func(i int) error {
			c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("held-%d", i), Namespace: "default"},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", class, 1, mig("1g.10gb"))}}}}
			c, err := client.ResourceV1().ResourceClaims("default").Create(ctx, c, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			c.Status.Allocation = &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: examplegen.NVIDIADriver, Pool: hs[i].node, Device: hs[i].device}}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{hs[i].node}}}}}},
			}
			_, err = client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
	}
	spec := resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", class, 1)}}
	if w.mig {
		spec = resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", class, 1, mig("1g.10gb"))}}
	}
	if w.mix {
		spec = resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				request("a", class, 1, mig("1g.10gb")), request("b", class, 1, mig("1g.10gb")),
				request("c", class, 1, mig("2g.20gb")), request("d", class, 1, mig("3g.40gb")),
			},
			Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(examplegen.NVIDIADriver + "/parentUUID"))}},
		}
	}
	switch {
	case w.floor:
	case w.templates:
		createTemplate(b, cp, "race", spec)
	default:
		parallel(b, w.pods, func(i int) error {
			c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), Namespace: "default"}, Spec: resourcev1.ResourceClaimSpec{Devices: spec}}
			_, err := client.ResourceV1().ResourceClaims("default").Create(ctx, c, metav1.CreateOptions{})
			return err
		})
	}
	parallel(b, w.pods, func(i int) error {
		pc := corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(fmt.Sprintf("claim-%d", i))}
		if w.templates {
			pc = corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("race")}
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default"},
			Spec: corev1.PodSpec{SchedulerName: profile, ResourceClaims: []corev1.PodResourceClaim{pc},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
		if w.floor {
			pod.Spec.ResourceClaims, pod.Spec.Containers[0].Resources.Claims = nil, nil
		}
		_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if w.templates {
		// The race starts when every claim exists, as for the other rows.
		waitFor(b, 10*time.Minute, "generated claims", func(ctx context.Context) (bool, error) {
			l, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) >= w.pods, err
		})
	}
}

// parallel runs f(0..n-1) on 16 writers and fails b on the first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		b.Fatal(*err)
	}
}

// schedulerProcess is dractl-scheduler running as a child process.
type schedulerProcess struct {
	cmd     *exec.Cmd
	port    int
	done    chan struct{}
	stopped bool
	// profiling: the process writes CPU profiles in phases.
	profiling bool
	log       string
}

// nextProfile makes a profiling scheduler end its current CPU profile
// and start the next.
func (p *schedulerProcess) nextProfile() {
	if p.profiling && p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGUSR1)
	}
}

// profilePrefix is where the scheduler writes its CPU profiles for a row
// and profile (-race-profile), or "" for none.
func profilePrefix(b *testing.B, w raceWorkload, profile string) string {
	if *raceProfile == "" {
		return ""
	}
	if err := os.MkdirAll(*raceProfile, 0o755); err != nil {
		b.Fatal(err)
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' {
			return r
		}
		return '-'
	}, w.name)
	dir, err := filepath.Abs(*raceProfile)
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, name+"."+profile+".cpu")
}

// startSchedulerProcess starts dractl-scheduler; with a profile prefix it
// profiles its CPU in phases (see nextProfile).
func startSchedulerProcess(b *testing.B, cp *framework.ControlPlane, qps int, profile string) *schedulerProcess {
	return runSchedulerProcess(b, cp, schedulerRun{qps: qps, profile: profile})
}

// schedulerRun is how a dractl-scheduler process is run.
type schedulerRun struct {
	// client is who the scheduler is; nil means an administrator.
	client *rest.Config
	// qps is the client's QPS and burst; zero keeps the configuration's.
	qps int
	// profile is a prefix for CPU profiles in phases, or "".
	profile string
	// leaderElect keeps the configuration's leader election; else off.
	leaderElect bool
	// binary is the dractl-scheduler executable; "" is -scheduler's.
	binary string
	// config is the KubeSchedulerConfiguration file; "" is twoProfiles.
	config string
}

// buildScheduler builds dractl-scheduler from the scheduler module once
// per run of the tests, for tests that must run the code under test
// rather than whatever -scheduler names (make scheduler builds that one
// for the soak and the race).
func buildScheduler(t testing.TB) string { return schedulerBuild.build(t) }

func runSchedulerProcess(b testing.TB, cp *framework.ControlPlane, r schedulerRun) *schedulerProcess {
	dir := b.TempDir()
	cfg := r.client
	if cfg == nil {
		cfg = cp.ClientConfig("dractl-scheduler")
	}
	file := r.config
	if file == "" {
		file = twoProfiles
	}
	config, err := framework.SchedulerConfig(file, cp.Kubeconfig(cfg), float32(r.qps), int32(r.qps), dir, r.leaderElect)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logPath := filepath.Join(dir, "scheduler.log")
	if r.profile != "" {
		logPath = r.profile + ".log" // kept with the profiles
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	// A serving certificate made beforehand, as a deployment mounts one:
	// without it the scheduler generates a key at start-up, in the CPU
	// time the race measures.
	cert := servingCert()
	if cert.err != nil {
		b.Fatal(cert.err)
	}
	certPEM, keyPEM := cert.cert, cert.key
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	binary := r.binary
	if binary == "" {
		binary = *schedulerBinary
	}
	cmd := exec.Command(binary, "--config="+config, fmt.Sprintf("--leader-elect=%t", r.leaderElect),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "--v=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A test binary killed from outside leaves no scheduler behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if r.profile != "" {
		cmd.Env = append(os.Environ(), schedapp.ProfileEnv+"="+r.profile)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &schedulerProcess{cmd: cmd, port: port, done: make(chan struct{}), profiling: r.profile != "", log: logPath}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	b.Cleanup(p.stop)
	return p
}

// servingCert is the scheduler's self-signed serving certificate and key
// (PEM) for 127.0.0.1, made once per benchmark process.
var servingCert = sync.OnceValue(func() (c keyPair) {
	c.cert, c.key, c.err = certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	return c
})

type keyPair struct {
	cert, key []byte // PEM
	err       error
}

func (p *schedulerProcess) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// cpu reads the process's user and system time from /proc.
func (p *schedulerProcess) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (in parentheses): utime is the 14th
	// and stime the 15th field of the whole line.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

// attemptQuantiles reads the scheduler's scheduling attempt histogram for
// a profile from /metrics and interpolates the median and 99th
// percentile within buckets.
func (p *schedulerProcess) attemptQuantiles(b *testing.B, profile string) (time.Duration, time.Duration) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", p.port))
	if err != nil {
		b.Logf("metrics: %v", err)
		return 0, 0
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bufio.NewReader(io.LimitReader(resp.Body, 64<<20)))
	if err != nil {
		b.Logf("metrics: %v", err)
		return 0, 0
	}
	fam := families["scheduler_scheduling_attempt_duration_seconds"]
	if fam == nil {
		return 0, 0
	}
	var h *dto.Histogram
	for _, m := range fam.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["profile"] == profile && labels["result"] == "scheduled" {
			h = m.Histogram
		}
	}
	if h == nil {
		return 0, 0
	}
	return quantile(h, 0.5), quantile(h, 0.99)
}

func quantile(h *dto.Histogram, q float64) time.Duration {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, bk := range h.Bucket {
		c := float64(bk.GetCumulativeCount())
		if c >= rank {
			ub := bk.GetUpperBound()
			if math.IsInf(ub, 1) {
				ub = prevBound
			}
			frac := 0.0
			if c > prevCount {
				frac = (rank - prevCount) / (c - prevCount)
			}
			return time.Duration((prevBound + frac*(ub-prevBound)) * float64(time.Second))
		}
		prevBound, prevCount = bk.GetUpperBound(), c
	}
	return time.Duration(prevBound * float64(time.Second))
}

func (p *schedulerProcess) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	terminate(p.cmd.Process, p.done, os.Interrupt, 20*time.Second)
}

func raceRows(w raceWorkload, rs []raceResult) []string {
	var out []string
	var stock raceResult
	for _, r := range rs {
		if r.profile == stockProfile {
			stock = r
		}
	}
	for _, r := range rs {
		podsPerSec := r.podsPerSec()
		cpuPerPod := r.cpuPerPod()
		name := "stock DynamicResources"
		ratio, ratioAfter := "", ""
		switch {
		case w.floor:
			name = "none at work (" + r.profile + " profile)"
		case r.profile == dractlProfile:
			name = "dractl"
			if stock.bound > 0 && r.bound > 0 {
				ratio = fmt.Sprintf(" (%.1f× less CPU, %.2f× pods/s)", stock.cpuPerPod()/cpuPerPod, podsPerSec/stock.podsPerSec())
				ratioAfter = fmt.Sprintf(" (%.1f×)", stock.cpuPerPodAfterFirst()/r.cpuPerPodAfterFirst())
			}
		}
		out = append(out, fmt.Sprintf("| %s, %d pods | %s | %d/%d | %.1f | %s / %s / %s | %s | %s | %.1f%s | %.1f%s | %.2f | %d |",
			w.name, w.pods, name, r.bound, r.pods, podsPerSec, secs(r.startToFirst), secs(r.boundP50), secs(r.boundP99), ms(r.p50), ms(r.p99), cpuPerPod, ratio,
			r.cpuPerPodAfterFirst(), ratioAfter, r.cpu.Seconds()/r.wall.Seconds(), r.violations))
	}
	return out
}

// raceRun is a workload and the run of each profile the table shows.
type raceRun struct {
	w       raceWorkload
	results []raceResult
}

// migAgainstPlain compares, per node count, dractl's pods/s on the
// 1g.10gb row with stock's on the plain row: the rate at which allocation
// would stop being what holds a MIG cluster back. Node counts without
// both rows give no line.
func migAgainstPlain(runs []raceRun) []string {
	of := func(w raceWorkload, profile string) (raceResult, bool) {
		for _, r := range runs {
			if r.w == w {
				for _, res := range r.results {
					if res.profile == profile && res.bound > 1 {
						return res, true
					}
				}
			}
		}
		return raceResult{}, false
	}
	var out []string
	for _, r := range runs {
		w := r.w
		if !w.mig || w.floor || w.full > 0 || w.templates || w.mix {
			continue
		}
		mig, ok := of(w, dractlProfile)
		if !ok {
			continue
		}
		var plain raceResult
		found := false
		for _, p := range runs {
			if !p.w.mig && p.w.nodes == w.nodes {
				plain, found = of(p.w, stockProfile)
			}
		}
		if !found {
			continue
		}
		line := fmt.Sprintf("- %d nodes: %.1f against %.1f pods/s (%.1f %%) over the whole run", w.nodes,
			mig.podsPerSec(), plain.podsPerSec(), 100*mig.podsPerSec()/plain.podsPerSec())
		if m, p := mig.podsPerSecAfterFirst(), plain.podsPerSecAfterFirst(); m > 0 && p > 0 {
			line += fmt.Sprintf(", %.1f against %.1f (%.1f %%) from the first bind", m, p, 100*m/p)
		}
		out = append(out, line)
	}
	return out
}

// podsPerSec is the pods bound per second of the whole run.
func (r raceResult) podsPerSec() float64 {
	return float64(r.bound) / r.wall.Seconds()
}

// podsPerSecAfterFirst is the pods bound per second from the first bind
// to the last: the scheduler's pace once start-up is paid.
func (r raceResult) podsPerSecAfterFirst() float64 {
	d := (r.lastBound - r.startToFirst).Seconds()
	if r.bound < 2 || d <= 0 {
		return 0
	}
	return float64(r.bound-1) / d
}

// sameCluster reports whether the two workloads run the same nodes,
// slices and number of pods, with no claims allocated beforehand.
func (w raceWorkload) sameCluster(o raceWorkload) bool {
	return w.mig == o.mig && w.nodes == o.nodes && w.pods == o.pods && w.full == 0 && o.full == 0
}

// aboveFloor compares what the row's DRA pods cost each profile beyond
// floor, the CPU per pod of pods without claims on the same cluster, if
// both profiles ran; else "".
func (w raceWorkload) aboveFloor(rs []raceResult, floor float64) string {
	var stock, dractl raceResult
	for _, r := range rs {
		switch r.profile {
		case stockProfile:
			stock = r
		case dractlProfile:
			dractl = r
		}
	}
	if stock.bound == 0 || dractl.bound == 0 {
		return ""
	}
	s, d := stock.cpuPerPod()-floor, dractl.cpuPerPod()-floor
	if d <= 0 {
		return fmt.Sprintf("- %s: stock %.1f, dractl %.1f ms per pod above the floor", w.name, s, d)
	}
	return fmt.Sprintf("- %s: stock %.1f, dractl %.1f ms per pod above the floor (%.1f×)", w.name, s, d, s/d)
}

// medianRuns keeps, per profile in the order first run, the run with the
// median CPU per pod (the higher of the two middle ones for an even
// count): a whole run, so that a row's columns come from one run. spread
// names each profile's range when a profile ran more than once.
func medianRuns(all []raceResult) (median []raceResult, spread string) {
	var order []string
	byProfile := map[string][]raceResult{}
	for _, r := range all {
		if _, ok := byProfile[r.profile]; !ok {
			order = append(order, r.profile)
		}
		byProfile[r.profile] = append(byProfile[r.profile], r)
	}
	var ranges []string
	for _, p := range order {
		rs := byProfile[p]
		slices.SortStableFunc(rs, func(a, b raceResult) int { return cmp.Compare(a.cpuPerPod(), b.cpuPerPod()) })
		median = append(median, rs[len(rs)/2])
		if len(rs) > 1 {
			name := p
			if p == stockProfile {
				name = "stock"
			}
			ranges = append(ranges, fmt.Sprintf("%s %.1f–%.1f (%d runs)", name, rs[0].cpuPerPod(), rs[len(rs)-1].cpuPerPod(), len(rs)))
		}
	}
	return median, strings.Join(ranges, ", ")
}

// cpuPerPod is the scheduler's CPU per pod bound over the whole run.
func (r raceResult) cpuPerPod() float64 {
	return float64(r.cpu.Microseconds()) / 1000 / float64(max(1, r.bound))
}

// cpuPerPodAfterFirst is the scheduler's CPU per pod bound after the
// first: what scheduling costs once start-up is paid.
func (r raceResult) cpuPerPodAfterFirst() float64 {
	return float64((r.cpu - r.cpuAtFirst).Microseconds()) / 1000 / float64(max(1, r.bound-1))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// secs is a time to bind; "—" for pods not bound.
func secs(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

const (
	raceBegin = "<!-- race:begin (make bench-e2e rewrites this section) -->"
	raceEnd   = "<!-- race:end -->"
)

func raceTable(rows, aboveFloor, againstPlain, spreads []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## The race: stock DynamicResources vs dractl in one kube-scheduler\n\n", raceBegin)
	fmt.Fprintf(&b, "`make bench-e2e` on %d CPUs (%s/%s), %s. One dractl-scheduler binary (kube-scheduler v1.37.2) with two profiles\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "(deploy/scheduler/config-two-profiles.yaml) runs as its own process against etcd and kube-apiserver in the benchmark's\n")
	fmt.Fprintf(&b, "process; both profiles with client QPS = burst = %d. Per row: a fresh control plane, Nodes without kubelets, all objects\n", *raceQPS)
	fmt.Fprintf(&b, "created first, then the scheduler started; the clock runs until every pod is bound. Bound after: when the first pod,\n")
	fmt.Fprintf(&b, "half of them and 99 %% were seen bound, from the scheduler's start (every pod waited from then on, so this is the\n")
	fmt.Fprintf(&b, "latency its owner sees). Attempt p50/p99: the scheduler's scheduling-attempt histogram (one cycle and its binding,\n")
	fmt.Fprintf(&b, "queueing left out; interpolated within buckets). CPU is the scheduler process's user+system time,\n")
	fmt.Fprintf(&b, "per pod over the whole run and, in the next column, per pod bound after the first (start-up and informer sync left out);\n")
	fmt.Fprintf(&b, "violations are CheckAllocations findings afterwards (a device used twice, counters or capacity exceeded). The row\n")
	fmt.Fprintf(&b, "without claims is the floor: the same cluster, pods without claims, one profile; what kube-scheduler itself costs,\n")
	fmt.Fprintf(&b, "which no DRA plugin removes.")
	if *raceRuns > 1 {
		fmt.Fprintf(&b, " Each row ran %d times per profile, the profiles taking turns; a profile's row is its run with\n", *raceRuns)
		fmt.Fprintf(&b, "the median CPU per pod.")
	}
	b.WriteString("\n\n")
	b.WriteString("| workload | plugin | bound | pods/s | bound after: first / 50 % / 99 % | attempt p50 | attempt p99 | scheduler CPU-ms/pod | after the first bind | cores used | violations |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	if len(aboveFloor) > 0 {
		b.WriteString("\nWhat the DRA pods of the rows on the floor's cluster cost beyond it (the row's CPU per pod minus the floor's):\n\n")
		for _, l := range aboveFloor {
			b.WriteString(l + "\n")
		}
	}
	if len(againstPlain) > 0 {
		b.WriteString("\ndractl's pods/s on the 1g.10gb rows against stock's on the plain row of as many nodes, over the whole run and from\n")
		b.WriteString("the first bind to the last (kube-scheduler's start-up left out: decoding and syncing the MIG slices before any cycle):\n\n")
		for _, l := range againstPlain {
			b.WriteString(l + "\n")
		}
	}
	if len(spreads) > 0 {
		b.WriteString("\nScheduler CPU-ms per pod over all runs of a row (min–max), the spread this machine's load gives:\n\n")
		for _, l := range spreads {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(raceEnd + "\n")
	return b.String()
}

// replaceSection puts section, which begins with the marker begin and
// ends with end and a newline, into the Markdown file in place of the
// previous one (between the same markers), or appends it.
func replaceSection(path, begin, end, section string) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(data)
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + section + s[j+len(end)+1:]
	} else {
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s += "\n"
		}
		s += section
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

func TestMIGAgainstPlain(t *testing.T) {
	plain := raceWorkload{name: "plain", nodes: 100, pods: 400}
	mig := raceWorkload{name: "MIG", nodes: 100, pods: 400, mig: true}
	full := raceWorkload{name: "MIG full", nodes: 100, pods: 400, mig: true, full: 52}
	lone := raceWorkload{name: "MIG, 500", nodes: 500, pods: 2000, mig: true}
	res := func(profile string, bound int, wall, first, last float64) raceResult {
		sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		return raceResult{profile: profile, bound: bound, pods: bound, wall: sec(wall), startToFirst: sec(first), lastBound: sec(last)}
	}
	runs := []raceRun{
		// Stock binds the plain row at 100 pods/s, 133 from its first bind;
		// dractl binds the MIG row at 80, 133 once its start-up is paid.
		{plain, []raceResult{res(stockProfile, 400, 4, 1, 4), res(dractlProfile, 400, 2, 0.5, 2)}},
		{mig, []raceResult{res(stockProfile, 400, 40, 2, 40), res(dractlProfile, 400, 5, 2, 5)}},
		// Neither a full cluster nor a node count without a plain row gives a line.
		{full, []raceResult{res(dractlProfile, 400, 5, 2, 5)}},
		{lone, []raceResult{res(dractlProfile, 2000, 20, 5, 20)}},
	}
	got := migAgainstPlain(runs)
	want := []string{"- 100 nodes: 80.0 against 100.0 pods/s (80.0 %) over the whole run, 133.0 against 133.0 (100.0 %) from the first bind"}
	if !slices.Equal(got, want) {
		t.Errorf("migAgainstPlain =\n%q\nwant\n%q", got, want)
	}
}

func TestMedianRuns(t *testing.T) {
	run := func(profile string, cpuMs int) raceResult {
		return raceResult{profile: profile, bound: 10, cpu: time.Duration(cpuMs) * 10 * time.Millisecond}
	}
	// Profiles take turns, as BenchmarkRace runs them.
	all := []raceResult{
		run(stockProfile, 40), run(dractlProfile, 7),
		run(stockProfile, 36), run(dractlProfile, 9),
		run(stockProfile, 38), run(dractlProfile, 6),
	}
	median, spread := medianRuns(all)
	if len(median) != 2 || median[0].profile != stockProfile || median[1].profile != dractlProfile {
		t.Fatalf("medianRuns kept %+v, want one run per profile in the order first run", median)
	}
	if got := median[0].cpuPerPod(); got != 38 {
		t.Errorf("stock: kept the run of %.1f CPU-ms per pod, want the median 38", got)
	}
	if got := median[1].cpuPerPod(); got != 7 {
		t.Errorf("dractl: kept the run of %.1f CPU-ms per pod, want the median 7", got)
	}
	if want := "stock 36.0–40.0 (3 runs), dractl 6.0–9.0 (3 runs)"; spread != want {
		t.Errorf("spread = %q, want %q", spread, want)
	}
	if _, spread := medianRuns(all[:2]); spread != "" {
		t.Errorf("one run per profile: spread = %q, want none", spread)
	}
}
