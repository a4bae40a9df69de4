package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// TestSoak runs the whole live system under a seeded random history of
// work and faults (soak_schedule_test.go) for $SOAK (a duration; `make
// soak` sets a short one) from seed $SOAK_SEED, checking its invariants
// from the API server and the drivers' state after every event and once
// the faults stop. A violation fails the test with the seed and the
// smallest history found that still reproduces it.
//
// The system: kube-apiserver on etcd (through a StallProxy), the
// resourceclaim controller, two dractl-scheduler processes (the stock
// and dractl profiles) with leader election, two GPU nodes each with the
// kubelet's DRA manager and a dractl-gpu-driver process, two nodes with
// plain pools the soak republishes itself, two monitor replicas and two
// dractl-pool-publisher processes with leader election. Every component
// talks to kube-apiserver through a FaultProxy; the checker and the
// soak's own writes (a user's and a driver's) do not.
func TestSoak(t *testing.T) {
	d := os.Getenv("SOAK")
	if d == "" {
		t.Skip("SOAK is not set: `make soak` runs the soak (SOAK=30m for a long one)")
	}
	duration, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("SOAK=%q: %v", d, err)
	}
	seed := uint64(1)
	if s := os.Getenv("SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
	}
	if _, err := os.Stat(*schedulerBinary); err != nil {
		t.Fatalf("the soak runs the dractl-scheduler binary: %v (make scheduler)", err)
	}
	var res *soakResult
	t.Run("soak", func(t *testing.T) {
		g := newSoakGenerator(seed)
		res = runSoak(t, seed, func(i int) (soakEvent, bool) { return g.next(), true }, duration)
	})
	if res == nil {
		return
	}
	// Printed, not logged: the figures are the point of a passing run.
	fmt.Print(res.report(seed, duration))
	if path := os.Getenv("SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(res.report(seed, duration)), 0o644); err != nil {
			t.Error(err)
		}
	}
	if res.violation == "" {
		return
	}
	// Replays of shrinking candidates: each a fresh cluster, at most
	// $SOAK_SHRINK_RUNS (default 6) of them.
	runs := 6
	if s := os.Getenv("SOAK_SHRINK_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	replay := 0
	minimal := shrink(res.history, runs, func(h []soakEvent) bool {
		replay++
		var r *soakResult
		t.Run(fmt.Sprintf("replay-%d", replay), func(t *testing.T) {
			r = runSoak(t, seed, func(i int) (soakEvent, bool) {
				if i < len(h) {
					return h[i], true
				}
				return soakEvent{}, false
			}, 0)
		})
		return r != nil && r.violation != ""
	})
	t.Fatalf("seed %d: %s\nafter the history (%d events) shrunk from %d events:\n%s(rerun: SOAK=%s SOAK_SEED=%d make soak)",
		seed, res.violation, len(minimal), len(res.history), formatHistory(minimal), duration, seed)
}

// soakResult is what a soak did and found.
type soakResult struct {
	history []soakEvent
	ops     map[soakKind]int
	// skipped are faults not injected: no leader to kill within 30 s
	// (a failover under way).
	skipped   map[soakKind]int
	injected  map[framework.Fault]int
	writes    int
	checks    int
	violation string
	// driverKills counts drivers that died at their failpoint.
	driverKills int
	// exits counts replicas that ended on their own (kube-scheduler exits
	// when it cannot renew its Lease: kube-apiserver restarted, etcd
	// stalled), by controller; the soak starts another, as a Deployment
	// does.
	exits map[string]int
	// upstream are the pods of the stock profile that kube-scheduler's
	// own DynamicResources plugin left bound without their claims
	// reserved (see stockWeakness): found, reported, not failed on.
	upstream map[string]bool
	// upstreamShared are the devices and counter sets over-used by claims
	// of the stock profile only (see dropStockWeakness), and
	// upstreamClaims those claims: found, reported, not failed on.
	upstreamShared map[string]bool
	upstreamClaims map[string]bool
	// failover are the times from a leader's death to the Lease's next
	// acquisition, by controller.
	failover map[string][]time.Duration
	elapsed  time.Duration
	// killsMidBinding counts the scheduler kills that caught pods in
	// their binding cycle, podsMidBinding those pods (caughtBinding).
	killsMidBinding, podsMidBinding int
	// privileges is, by deploy/ component, what it used of its RBAC;
	// refusedOnce counts its requests refused and granted when retried.
	privileges  []string
	refusedOnce map[string]int
}

func (r *soakResult) report(seed uint64, duration time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, history of %s, %s in all (start-up, history, convergence), %d events, %d invariant checks, violation: %s\n",
		seed, duration, r.elapsed.Round(time.Second), len(r.history), r.checks, cmpOrNone(r.violation))
	kinds := make([]string, 0, len(r.ops))
	for k := range r.ops {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-18s %d", k, r.ops[soakKind(k)])
		if n := r.skipped[soakKind(k)]; n > 0 {
			fmt.Fprintf(&b, " (%d not injected: no leader within 30 s)", n)
		}
		b.WriteString("\n")
	}
	if len(r.upstream) > 0 {
		names := slices.Sorted(maps.Keys(r.upstream))
		fmt.Fprintf(&b, "stock DynamicResources profile: %d pods bound without their claims reserved (kube-scheduler's Unreserve after a Bind of unknown outcome): %s\n",
			len(names), strings.Join(names, ", "))
	}
	if len(r.upstreamShared) > 0 {
		fmt.Fprintf(&b, "stock DynamicResources profile: %d over-uses among its own claims only (kube-scheduler's Unreserve after a claim write of unknown outcome): %s\n",
			len(r.upstreamShared), strings.Join(slices.Sorted(maps.Keys(r.upstreamShared)), "; "))
	}
	fmt.Fprintf(&b, "drivers SIGKILLed at a prepare failpoint: %d\n", r.driverKills)
	fmt.Fprintf(&b, "scheduler leaders SIGKILLed mid-binding (a claim written, its pod not bound): %d, with %d pods\n", r.killsMidBinding, r.podsMidBinding)
	for _, n := range slices.Sorted(maps.Keys(r.exits)) {
		fmt.Fprintf(&b, "%s replicas that exited on their own (and were replaced): %d\n", n, r.exits[n])
	}
	fmt.Fprintf(&b, "writes through the proxy: %d, failed by it:\n", r.writes)
	for _, f := range framework.Faults {
		fmt.Fprintf(&b, "  %-20s %d\n", f, r.injected[f])
	}
	for _, p := range r.privileges {
		fmt.Fprintf(&b, "RBAC %s\n", p)
	}
	for _, n := range slices.Sorted(maps.Keys(r.refusedOnce)) {
		fmt.Fprintf(&b, "RBAC %s: %d requests refused, then granted when retried\n", n, r.refusedOnce[n])
	}
	names := make([]string, 0, len(r.failover))
	for n := range r.failover {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ds := r.failover[n]
		fmt.Fprintf(&b, "failover %s: %d, p50 %s, p99 %s, max %s\n", n, len(ds),
			percentile(ds, 0.5).Round(time.Millisecond), percentile(ds, 0.99).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
	}
	return b.String()
}

func cmpOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// percentile is the nearest-rank percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

// soak is one run: the cluster, its replicas and what was measured.
type soak struct {
	t     *testing.T
	cp    *framework.ControlPlane
	proxy *framework.FaultProxy
	res   *soakResult

	nodes    map[string]*gpuNode
	armed    map[string]bool // drivers started with a failpoint
	sched    []*schedulerProcess
	schedSA  *rest.Config
	monSA    *rest.Config
	monitors []*monitorReplica
	pubBin   string
	pubKC    string
	pubs     []*publisher
	replicas int // replicas started, for unique identities
	plainGen map[string]int64
	// profiles is the scheduler profile of each group of pods (and of its
	// claim), by group name.
	profiles map[string]string

	auditLog string // the components' requests (auditConfig)

	mu       sync.Mutex
	wg       sync.WaitGroup
	failover map[string][]time.Duration
}

func runSoak(t *testing.T, seed uint64, next func(i int) (soakEvent, bool), duration time.Duration) *soakResult {
	start := time.Now()
	s := &soak{t: t, res: &soakResult{ops: map[soakKind]int{}, skipped: map[soakKind]int{}, upstream: map[string]bool{}, upstreamShared: map[string]bool{}, upstreamClaims: map[string]bool{}, exits: map[string]int{}, refusedOnce: map[string]int{}}, armed: map[string]bool{}, nodes: map[string]*gpuNode{},
		plainGen: map[string]int64{}, profiles: map[string]string{}, failover: map[string][]time.Duration{}}
	s.setUp(seed)
	// SOAK is how long the history runs, the cluster's start-up apart.
	historyStart := time.Now()
	defer func() {
		s.wg.Wait()
		s.res.injected, s.res.writes = s.proxy.Injected()
		s.res.failover = s.failover
		s.res.elapsed = time.Since(start)
	}()
	if v := s.check(); v != "" {
		s.res.violation = "before any event: " + v
		return s.res
	}
	for i := 0; ; i++ {
		if duration > 0 && time.Since(historyStart) >= duration {
			break
		}
		e, ok := next(i)
		if !ok {
			break
		}
		s.res.history = append(s.res.history, e)
		s.res.ops[e.Kind]++
		t.Logf("event %d: %s", i, e)
		s.superviseDrivers()
		s.superviseReplicas()
		s.do(e)
		time.Sleep(e.Pause)
		if v := s.check(); v != "" {
			s.res.violation = fmt.Sprintf("after event %d (%s): %s", i, e, v)
			return s.res
		}
	}
	if s.res.violation = s.quiesce(); s.res.violation == "" {
		s.res.violation = s.privileges()
	}
	return s.res
}

// privileges reads what each deploy/ component asked kube-apiserver for
// during the soak, through every fault, restart and failover, as its
// own ServiceAccount under the chart's RBAC. A request refused and never
// granted on a retry is a rule the component lacks: a violation. The
// permissions each used are reported; whether every rule is used is
// TestLeastPrivilege's to judge, on a run that walks every path once
// (a seeded history need not delete a slice, say).
func (s *soak) privileges() string {
	requests := readAudit(s.t, s.auditLog)
	grants := renderedGrants(s.t)
	var refused []string
	for _, c := range components {
		reqs := requests[c.user()]
		used, unused := usage(grants[c.template], reqs)
		line := fmt.Sprintf("%s: %d requests, %d of %d permissions used", c.name, len(reqs), len(used), len(used)+len(unused))
		if len(unused) > 0 {
			names := make([]string, len(unused))
			for i, u := range unused {
				names[i] = u.permission.String()
			}
			line += " (not: " + strings.Join(names, ", ") + ")"
		}
		forGood := refusedForGood(reqs)
		refused403 := 0
		for _, r := range reqs {
			if r.code == 403 {
				refused403++
			}
		}
		if n := refused403 - len(forGood); n > 0 {
			s.res.refusedOnce[c.name] = n
		}
		s.res.privileges = append(s.res.privileges, line)
		for _, r := range forGood {
			refused = append(refused, fmt.Sprintf("%s was refused %s (%s): its RBAC lacks it", c.name, r, r.uri))
		}
	}
	return strings.Join(refused, "; ")
}

// setUp starts the cluster. Components go through the proxy; the soak's
// own client (a user's, a driver's) does not.
func (s *soak) setUp(seed uint64) {
	t := s.t
	// kube-apiserver answers a request whose storage call outlasts 5 s
	// with 504 and lets the write complete behind it: an etcd stall
	// longer than that is a write of unknown outcome.
	users := make([]string, len(components))
	for i, c := range components {
		users[i] = c.user()
	}
	audit, auditLog := auditConfig(t, t.TempDir(), users...)
	s.auditLog = auditLog
	s.cp = framework.StartControlPlane(t, framework.Options{StallableEtcd: true, APIServerFlags: append(audit, "--request-timeout=5s")})
	cp := s.cp
	proxy, err := framework.NewFaultProxy(cp.Config.Host, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	s.proxy = proxy
	cp.RouteComponents(proxy)
	cp.Start(framework.ResourceClaimController{})
	// The components' ServiceAccounts, RBAC and policies come from the
	// chart as `helm install` creates them.
	installChart(t, cp, t.TempDir())

	s.schedSA = cp.Via(cp.ServiceAccount(t, "kube-system", "dractl-scheduler"))
	for range 2 {
		s.startScheduler()
	}

	for _, name := range soakGPUNodes {
		n := newFakeGPUNode(t, cp, name)
		n.start(t, "")
		s.nodes[name] = n
	}
	for _, n := range s.nodes {
		n.published(t)
	}
	for _, c := range soakMIGClasses {
		createTemplate(t, cp, c, resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("gpu", c, 1)}})
	}
	createNodes(t, cp, soakPlainNodes...)
	for _, n := range soakPlainNodes {
		s.republish(n, 4)
	}
	s.setClass(0)

	s.monSA = cp.Via(cp.ServiceAccount(t, "dractl-system", "dractl-monitor"))
	for range 2 {
		s.startMonitor()
	}

	sa := cp.ServiceAccount(t, publisherNS, publisherAccount)
	s.pubKC, s.pubBin = cp.Kubeconfig(cp.Via(sa)), buildPublisher(t)
	for range 2 {
		s.startPublisher()
	}
	var leaders string
	if err := pollUntil(2*time.Minute, func() bool {
		ctx := cp.Context()
		sched, mon, pub := s.schedulerLeader(), s.monitorLeader(ctx), s.publisherLeader(ctx)
		leaders = fmt.Sprintf("scheduler replica %d (Lease held by %q), monitor replica %d, publisher replica %d (-1: none)",
			sched, s.holder(ctx, "kube-system", schedulerLease), mon, pub)
		return sched >= 0 && mon >= 0 && pub >= 0
	}); err != nil {
		for _, p := range s.sched {
			p.logTail(t)
		}
		t.Fatalf("not every controller has a leader: %s", leaders)
	}
}

// schedulerLease is the Lease of the soak's scheduler configuration,
// config-two-profiles.yaml, which replaces kube-scheduler and so elects
// through kube-scheduler's own Lease.
const schedulerLease = "kube-scheduler"

func (s *soak) client() kubernetes.Interface { return s.cp.Client }

func (s *soak) startScheduler() {
	// deploy/scheduler's leader election, kube-scheduler's default
	// durations: failover is measured with what a cluster runs.
	s.sched = append(s.sched, runSchedulerProcess(s.t, s.cp, schedulerRun{client: s.schedSA, leaderElect: true}))
}

// schedulerLeader is the index of the running scheduler process that
// has acquired the Lease, or -1. kube-scheduler exits when it loses the
// Lease, so one that acquired it and runs holds it.
func (s *soak) schedulerLeader() int {
	for i, p := range s.sched {
		if !p.running() {
			continue
		}
		if data, _ := os.ReadFile(p.log); strings.Contains(string(data), `"Successfully acquired lease"`) {
			return i
		}
	}
	return -1
}

func (p *schedulerProcess) logTail(t testing.TB) {
	data, _ := os.ReadFile(p.log)
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	t.Logf("dractl-scheduler (pid %d):\n%s", p.cmd.Process.Pid, data)
}

// monitorReplica is one replica of the monitor, in this process.
type monitorReplica struct {
	id     string
	base   string
	cancel context.CancelFunc
	done   chan struct{}
	srv    *http.Server
}

// userAgent ends with a slash so that FaultProxy.Partition of one replica
// (a prefix) does not cut off monitor-12 with monitor-1.
func (r *monitorReplica) userAgent() string { return monitor.Component + "/" + r.id + "/" }

func (s *soak) startMonitor() {
	t := s.t
	s.replicas++
	r := &monitorReplica{id: fmt.Sprintf("monitor-%d", s.replicas), done: make(chan struct{})}
	cfg := rest.CopyConfig(s.monSA)
	cfg.UserAgent = r.userAgent()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := monitor.New(monitor.Options{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.srv = &http.Server{Handler: m.Handler()}
	go func() { _ = r.srv.Serve(ln) }()
	r.base = "http://" + ln.Addr().String()
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(s.cp.Context())
	go func() {
		defer close(r.done)
		_ = m.RunWithLeaderElection(ctx, monitor.LeaderElection{Namespace: "dractl-system", Identity: r.id})
	}()
	t.Cleanup(r.stop)
	s.monitors = append(s.monitors, r)
}

func (r *monitorReplica) stop() {
	r.cancel()
	<-r.done
	r.srv.Close()
}

func (s *soak) monitorLeader(ctx context.Context) int {
	h := s.holder(ctx, "dractl-system", monitor.Component)
	return slices.IndexFunc(s.monitors, func(r *monitorReplica) bool { return r.id == h })
}

func (s *soak) startPublisher() {
	s.replicas++
	s.pubs = append(s.pubs, startPublisher(s.t, s.pubBin, s.pubKC, fmt.Sprintf("publisher-%d", s.replicas), "../examples/tpu-multihost/resourceslices.yaml"))
}

func (s *soak) publisherLeader(ctx context.Context) int {
	h := s.holder(ctx, publisherNS, tpuDriver+"-publisher")
	return slices.IndexFunc(s.pubs, func(p *publisher) bool { return p.identity == h })
}

func (s *soak) holder(ctx context.Context, ns, name string) string {
	l, err := s.client().CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// measureFailover waits, in the background, for the Lease ns/name to be
// acquired by another holder than old, and records how long after died
// that was (the Lease's own acquireTime, not when the soak saw it). It
// reads through the proxy, which fails writes only and whose address
// outlives a restart of kube-apiserver.
func (s *soak) measureFailover(controller, ns, name, old string, died time.Time) {
	client, err := kubernetes.NewForConfig(s.cp.ClientConfig("soak-failover"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == old || l.Spec.AcquireTime == nil {
				continue
			}
			s.mu.Lock()
			s.failover[controller] = append(s.failover[controller], l.Spec.AcquireTime.Sub(died))
			s.mu.Unlock()
			return
		}
		s.t.Errorf("%s: no new leader within 2 minutes of the leader's death", controller)
	}()
}

// superviseReplicas replaces scheduler and publisher processes that
// exited on their own, as their Deployments would.
func (s *soak) superviseReplicas() {
	for i := 0; i < len(s.sched); {
		if s.sched[i].running() {
			i++
			continue
		}
		s.res.exits["dractl-scheduler"]++
		s.sched = slices.Delete(s.sched, i, i+1)
		s.startScheduler()
	}
	for i := 0; i < len(s.pubs); {
		select {
		case <-s.pubs[i].exited:
			s.res.exits["pool publisher"]++
			s.pubs = slices.Delete(s.pubs, i, i+1)
			s.startPublisher()
		default:
			i++
		}
	}
}

// superviseDrivers starts again a driver that died at its failpoint, as
// the kubelet restarts a DaemonSet's container.
func (s *soak) superviseDrivers() {
	for name, n := range s.nodes {
		if n.cmd == nil {
			n.start(s.t, "")
			continue
		}
		select {
		case <-n.exited:
			n.cmd = nil
			s.armed[name] = false
			s.res.driverKills++
			n.start(s.t, "")
		default:
		}
	}
}

func (s *soak) do(e soakEvent) {
	t, ctx := s.t, s.cp.Context()
	switch e.Kind {
	case opTemplatePod:
		s.profiles[e.Name] = e.Profile
		s.createPods(e.Name, e.Profile, e.Class, "", 1)
	case opClaimPods:
		s.profiles[e.Name] = e.Profile
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: "default"}, Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("dev", soakPlainClass, 1)}}}}
		if _, err := s.client().ResourceV1().ResourceClaims("default").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("claim %s: %v", e.Name, err)
		}
		s.createPods(e.Name, e.Profile, "", e.Name, e.Pods)
	case opDelete:
		s.deleteGroup(e.Name)
	case opRepublish:
		s.republish(e.Node, e.Arg)
	case opClass:
		s.setClass(e.Arg)
	case faultWrites:
		s.proxy.SetRate(float64(e.Arg) / 1000)
	case faultAPIServer:
		if err := s.cp.RestartAPIServer(); err != nil {
			t.Fatalf("restarting kube-apiserver: %v", err)
		}
		if err := s.proxy.SetBackend(s.cp.Config.Host); err != nil {
			t.Fatal(err)
		}
	case faultEtcd:
		s.cp.Etcd.Stall(time.Duration(e.Arg) * time.Millisecond)
	case faultScheduler:
		s.awaitLeader(s.schedulerLeader)
		// Watched from before the pods exist, so that the first claim
		// write of the burst is seen.
		w, err := s.client().ResourceV1().ResourceClaims("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("watching claims for the scheduler kill: %v", err)
		}
		s.createPods(e.Name, e.Profile, soakMIGClasses[0], "", 3)
		if w != nil {
			awaitAllocation(w, e.Name, 5*time.Second)
		}
		i := s.schedulerLeader()
		if i < 0 {
			s.res.skipped[e.Kind]++ // between leaders: a failover is under way
			return
		}
		old := s.holder(ctx, "kube-system", schedulerLease)
		_ = s.sched[i].cmd.Process.Kill()
		s.measureFailover("dractl-scheduler", "kube-system", schedulerLease, old, time.Now())
		<-s.sched[i].done
		if n, err := s.caughtBinding(e.Name); err != nil {
			t.Logf("the pods of %s at the scheduler's death: %v", e.Name, err)
		} else if n > 0 {
			s.res.killsMidBinding++
			s.res.podsMidBinding += n
		}
		s.sched = slices.Delete(s.sched, i, i+1)
		s.startScheduler()
	case faultDriver:
		n := s.nodes[e.Node]
		n.restart(t, prepare.PrepareFailpoints[e.Arg%len(prepare.PrepareFailpoints)])
		s.armed[e.Node] = true
		s.createPods(e.Name, e.Profile, e.Class, "", 1)
	case faultMonitor:
		i := s.awaitLeader(func() int { return s.monitorLeader(ctx) })
		if i < 0 {
			s.res.skipped[e.Kind]++
			return
		}
		r := s.monitors[i]
		// Cut off first, so that the dying replica cannot release its
		// Lease: a killed process does not.
		s.proxy.Partition(r.userAgent(), true)
		died := time.Now()
		r.stop()
		s.measureFailover("monitor", "dractl-system", monitor.Component, r.id, died)
		s.monitors = slices.Delete(s.monitors, i, i+1)
		s.startMonitor()
	case faultPublisher:
		i := s.awaitLeader(func() int { return s.publisherLeader(ctx) })
		if i < 0 {
			s.res.skipped[e.Kind]++
			return
		}
		p := s.pubs[i]
		_ = p.cmd.Process.Kill()
		s.measureFailover("pool publisher", publisherNS, tpuDriver+"-publisher", p.identity, time.Now())
		<-p.exited
		s.pubs = slices.Delete(s.pubs, i, i+1)
		s.startPublisher()
	default:
		t.Fatalf("unknown event %s", e)
	}
}

// awaitLeader waits up to 30 s for a controller to have a leader (a
// failover may be under way: a replica killed or exited a moment ago)
// and returns leader()'s last answer, -1 for none.
func (s *soak) awaitLeader(leader func() int) int {
	i := leader()
	for deadline := time.Now().Add(30 * time.Second); i < 0 && time.Now().Before(deadline); i = leader() {
		time.Sleep(200 * time.Millisecond)
		s.superviseReplicas()
	}
	return i
}

// awaitAllocation returns once a claim of a pod of group shows an
// allocation (the scheduler's PreBind wrote it: the pod's Bind comes
// next), or after timeout. It stops w.
func awaitAllocation(w watch.Interface, group string, timeout time.Duration) {
	defer w.Stop()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			c, isClaim := ev.Object.(*resourcev1.ResourceClaim)
			if !isClaim || c.Status.Allocation == nil {
				continue
			}
			for _, o := range c.OwnerReferences {
				if o.Kind == "Pod" && strings.HasPrefix(o.Name, group+"-") {
					return
				}
			}
		case <-deadline:
			return
		}
	}
}

// caughtBinding counts the pods of a group that a scheduler's death
// caught in their binding cycle: PreBind had written their claim's
// allocation, the pod was not bound.
func (s *soak) caughtBinding(group string) (int, error) {
	ctx := s.cp.Context()
	pods, err := s.client().CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "soak-group=" + group})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		for _, pc := range p.Spec.ResourceClaims {
			name := podClaim(&p, pc)
			if name == "" {
				continue
			}
			c, err := s.client().ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return 0, err
			}
			if c.Status.Allocation != nil {
				n++
				break
			}
		}
	}
	return n, nil
}

// createPods creates pods NAME-0..n-1 whose claim "dev" comes from a
// template (the MIG class's) or is the claim named.
func (s *soak) createPods(name, profile, template, claim string, n int) {
	for i := range n {
		pc := corev1.PodResourceClaim{Name: "dev"}
		if template != "" {
			pc.ResourceClaimTemplateName = ptr.To(template)
		} else {
			pc.ResourceClaimName = ptr.To(claim)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: "default", Labels: map[string]string{"soak-group": name}},
			Spec: corev1.PodSpec{
				SchedulerName:  profile,
				ResourceClaims: []corev1.PodResourceClaim{pc},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "dev"}}}}},
			},
		}
		if _, err := s.client().CoreV1().Pods("default").Create(s.cp.Context(), pod, metav1.CreateOptions{}); err != nil {
			s.t.Fatalf("pod %s: %v", pod.Name, err)
		}
	}
}

// deleteGroup deletes a group's pods as their owner would, and its claim.
// A pod on a node without a kubelet has nobody to finish its deletion:
// the soak does the kubelet's part (grace period zero), as the scheduler
// tests do.
func (s *soak) deleteGroup(name string) {
	ctx := s.cp.Context()
	pods, err := s.client().CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "soak-group=" + name})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, p := range pods.Items {
		opts := metav1.DeleteOptions{}
		if s.nodes[p.Spec.NodeName] == nil {
			opts.GracePeriodSeconds = ptr.To[int64](0)
		}
		if err := s.client().CoreV1().Pods("default").Delete(ctx, p.Name, opts); err != nil && !apierrors.IsNotFound(err) {
			s.t.Fatal(err)
		}
	}
	err = s.client().ResourceV1().ResourceClaims("default").Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
}

// republish replaces node's plain pool by a new generation of n devices,
// the way a driver does: the new slice first, then the old one deleted.
func (s *soak) republish(node string, n int) {
	ctx := s.cp.Context()
	old := s.plainGen[node]
	gen := old + 1
	sl := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-plain-g%d", node, gen)},
		Spec: resourcev1.ResourceSliceSpec{Driver: plainDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1}},
	}
	for i := range n {
		sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"index": {IntValue: ptr.To(int64(i))}}})
	}
	if _, err := s.client().ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("slice %s: %v", sl.Name, err)
	}
	s.plainGen[node] = gen
	if old > 0 {
		err := s.client().ResourceV1().ResourceSlices().Delete(ctx, fmt.Sprintf("%s-plain-g%d", node, old), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			s.t.Fatal(err)
		}
	}
}

// setClass creates or changes the plain class: every device (0) or the
// even-indexed ones (1).
func (s *soak) setClass(variant int) {
	ctx := s.cp.Context()
	expr := "device.driver == '" + plainDriver + "'"
	if variant == 1 {
		expr += " && device.attributes['" + plainDriver + "'].index % 2 == 0"
	}
	spec := resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}
	c, err := s.client().ResourceV1().DeviceClasses().Get(ctx, soakPlainClass, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c = &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: soakPlainClass}, Spec: spec}
		_, err = s.client().ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{})
	} else if err == nil {
		c.Spec = spec
		_, err = s.client().ResourceV1().DeviceClasses().Update(ctx, c, metav1.UpdateOptions{})
	}
	if err != nil {
		s.t.Fatalf("class %s: %v", soakPlainClass, err)
	}
}

// check runs the invariants that hold at every moment, on one snapshot of
// the API server and the drivers' state; "" if they hold. A snapshot that
// cannot be read (kube-apiserver restarting) is not a check.
func (s *soak) check() string {
	snap, err := framework.TakeSnapshot(s.cp.Context(), s.client())
	if err != nil {
		s.t.Logf("no check: %v", err)
		return ""
	}
	problems, err := s.invariants(snap, false)
	if err != nil {
		return err.Error()
	}
	return strings.Join(problems, "; ")
}

// invariants checks one snapshot: the allocations (the stock profile's
// known weakness apart), the reservations and each node's partitions,
// exactly those of running pods' claims when exact.
func (s *soak) invariants(snap *framework.Snapshot, exact bool) ([]string, error) {
	s.res.checks++
	problems, err := snap.Check()
	if err != nil {
		return nil, err
	}
	problems = s.dropStockWeakness(snap, problems)
	problems = append(problems, checkReservations(snap)...)
	for name, n := range s.nodes {
		problems = append(problems, checkPartitions(snap, name, n.partitions(s.t), exact)...)
	}
	return problems, nil
}

// dropStockWeakness takes out of problems what kube-scheduler's own
// DynamicResources plugin does wrong and records it: found, reported, not
// failed on. Its Unreserve gives up a claim's allocation when a write
// failed, also when the write had an unknown outcome and was stored:
//
//   - after a failed Bind, it takes the pod out of its claims'
//     reservedFor: the pod is bound, its claim no longer reserved for it
//     (then deallocated by the resourceclaim controller), and the kubelet
//     never starts it;
//   - after a failed claim status write, it takes the allocation out of
//     the claim tracker: until the informer brings the stored allocation,
//     the profile allocates the same devices (or counters) again.
//
// Only problems among the stock profile's claims are taken out: a device
// or counter set over-used with a claim of dractl's profile among its
// holders stays a failure, since dractl's plugin keeps an allocation of
// unknown outcome in flight until its write shows (pkg/scheduler/schedplugin's
// feed) and keeps a reservation once PreBind wrote it (Unreserve).
func (s *soak) dropStockWeakness(snap *framework.Snapshot, problems []string) []string {
	stock := map[string]bool{}
	for _, p := range snap.Pods {
		if p.Spec.SchedulerName == stockProfile {
			stock[p.Namespace+"/"+p.Name] = true
		}
	}
	var consumers map[string][]string // lazily: counter set -> claims
	return slices.DeleteFunc(problems, func(p string) bool {
		f := strings.Fields(p)
		switch {
		case len(f) >= 2 && f[0] == "pod" && stock[f[1]] &&
			(strings.HasSuffix(p, " not allocated") || strings.HasSuffix(p, " not reserved for it")):
			s.res.upstream[f[1]] = true
			return true
		case len(f) == 7 && f[0] == "device" && f[2] == "held":
			return s.stockOnly(snap, p, f[4], f[6])
		case len(f) >= 4 && f[0] == "counter" && f[2] == "of":
			set := strings.TrimSuffix(f[3], ":")
			if consumers == nil {
				consumers = counterConsumers(snap)
			}
			if !s.overUsedWithDevicesOnce(snap, set, f[1]) {
				// A device the stock profile gave out twice counts
				// twice: counted once, the set holds.
				s.res.upstreamShared[p] = true
				return true
			}
			return s.stockOnly(snap, p, consumers[set]...)
		}
		return false
	})
}

// stockOnly records problem as the stock profile's and says so when every
// claim named is one of the stock profile's.
func (s *soak) stockOnly(snap *framework.Snapshot, problem string, claims ...string) bool {
	if len(claims) == 0 {
		return false
	}
	for _, c := range claims {
		if s.claimProfile(snap, c) != stockProfile {
			return false
		}
	}
	s.res.upstreamShared[problem] = true
	for _, c := range claims {
		s.res.upstreamClaims[c] = true
	}
	return true
}

// overUsedWithDevicesOnce says whether counter of set ("driver/pool/set")
// is over-used when a device held by claims of the stock profile only is
// counted once, however many of them hold it. Counted as Check counts.
func (s *soak) overUsedWithDevicesOnce(snap *framework.Snapshot, set, counter string) bool {
	driver, rest, _ := strings.Cut(set, "/")
	pool, setName, _ := strings.Cut(rest, "/")
	devices, sets := snap.Current()
	available := sets[[3]string{driver, pool, setName}][counter]
	counted := map[string]bool{} // devices held by stock claims
	var used resource.Quantity
	for _, c := range snap.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		stock := s.claimProfile(snap, c.Namespace+"/"+c.Name) == stockProfile
		for _, r := range c.Status.Allocation.Devices.Results {
			d := devices[framework.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
			if r.Driver != driver || r.Pool != pool || d == nil || ptr.Deref(r.AdminAccess, false) ||
				r.ShareID != nil && len(d.ConsumesCounters) > 0 {
				continue
			}
			if stock {
				if counted[r.Device] {
					continue
				}
				counted[r.Device] = true
			}
			for _, cc := range d.ConsumesCounters {
				if cc.CounterSet == setName {
					used.Add(cc.Counters[counter].Value)
				}
			}
		}
	}
	return used.Cmp(available) > 0
}

// claimProfile is the scheduler profile of the pods a claim was made for
// ("namespace/name"): a standalone claim is named after its group, a
// claim from a template is owned by a pod of its group, named
// "<group>-<i>".
func (s *soak) claimProfile(snap *framework.Snapshot, key string) string {
	ns, name, _ := strings.Cut(key, "/")
	for _, c := range snap.Claims {
		if c.Namespace != ns || c.Name != name {
			continue
		}
		for _, o := range c.OwnerReferences {
			if o.Kind == "Pod" {
				if i := strings.LastIndex(o.Name, "-"); i > 0 {
					return s.profiles[o.Name[:i]]
				}
			}
		}
	}
	return s.profiles[name]
}

// counterConsumers lists by counter set ("driver/pool/set", as Check
// names it) the allocated claims ("namespace/name") holding a device of
// the pool's current generation that consumes from it.
func counterConsumers(snap *framework.Snapshot) map[string][]string {
	devices, _ := snap.Current()
	out := map[string][]string{}
	for _, c := range snap.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			d := devices[framework.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
			if d == nil {
				continue
			}
			for _, cc := range d.ConsumesCounters {
				k := r.Driver + "/" + r.Pool + "/" + cc.CounterSet
				if key := c.Namespace + "/" + c.Name; !slices.Contains(out[k], key) {
					out[k] = append(out[k], key)
				}
			}
		}
	}
	return out
}

// podClaim returns the name of the claim a pod's claim entry resolves to:
// its own name, or the one the resourceclaim controller generated.
func podClaim(p *corev1.Pod, pc corev1.PodResourceClaim) string {
	name := ptr.Deref(pc.ResourceClaimName, "")
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == pc.Name {
			name = ptr.Deref(st.ResourceClaimName, "")
		}
	}
	return name
}

// checkReservations: a claim is reserved only for pods that use it; a
// claim made from a template, only for the pod it was made for.
func checkReservations(snap *framework.Snapshot) []string {
	pods := map[types.UID]*corev1.Pod{}
	for i := range snap.Pods {
		pods[snap.Pods[i].UID] = &snap.Pods[i]
	}
	var problems []string
	for _, c := range snap.Claims {
		var owner types.UID
		for _, o := range c.OwnerReferences {
			if ptr.Deref(o.Controller, false) && o.Kind == "Pod" {
				owner = o.UID
			}
		}
		for _, r := range c.Status.ReservedFor {
			p := pods[r.UID]
			if p == nil {
				continue // deleted: the resourceclaim controller removes it
			}
			if owner != "" && owner != r.UID {
				problems = append(problems, fmt.Sprintf("claim %s made for pod %s is reserved for pod %s", c.Name, owner, p.Name))
			}
			if !slices.ContainsFunc(p.Spec.ResourceClaims, func(pc corev1.PodResourceClaim) bool { return podClaim(p, pc) == c.Name }) {
				problems = append(problems, fmt.Sprintf("claim %s is reserved for pod %s, which does not use it", c.Name, p.Name))
			}
		}
	}
	return problems
}

// checkPartitions compares the partitions on a GPU node with the claims:
// at any time, a device has at most one partition and a partition of a
// claim that is allocated is on a device allocated to it; once the
// cluster is quiet (exact), the partitions are exactly the devices of
// the node's claims reserved for running pods, one each.
func checkPartitions(snap *framework.Snapshot, node string, parts []prepare.Partition, exact bool) []string {
	claims := map[types.UID]*resourcev1.ResourceClaim{}
	for i := range snap.Claims {
		claims[snap.Claims[i].UID] = &snap.Claims[i]
	}
	var problems []string
	onDevice := map[string]int{}
	have := map[[2]string]bool{}
	for _, p := range parts {
		onDevice[p.Device]++
		if onDevice[p.Device] == 2 {
			problems = append(problems, fmt.Sprintf("node %s: device %s has two partitions", node, p.Device))
		}
		have[[2]string{string(p.Claim), p.Device}] = true
		c := claims[p.Claim]
		if c == nil || c.Status.Allocation == nil {
			if exact {
				problems = append(problems, fmt.Sprintf("node %s: partition %s of device %s belongs to claim %s, which is not allocated", node, p.ID, p.Device, p.Claim))
			}
			continue
		}
		if !slices.ContainsFunc(c.Status.Allocation.Devices.Results, func(r resourcev1.DeviceRequestAllocationResult) bool {
			return r.Driver == gpuDriver && r.Pool == node && r.Device == p.Device
		}) {
			problems = append(problems, fmt.Sprintf("node %s: partition %s on device %s for claim %s, which is allocated elsewhere", node, p.ID, p.Device, c.Name))
		}
	}
	if !exact {
		return problems
	}
	running := map[types.UID]bool{}
	for _, p := range snap.Pods {
		if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning {
			running[p.UID] = true
		}
	}
	for _, c := range snap.Claims {
		if c.Status.Allocation == nil || !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return running[r.UID] }) {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == gpuDriver && r.Pool == node && !have[[2]string{string(c.UID), r.Device}] {
				problems = append(problems, fmt.Sprintf("node %s: claim %s of a running pod has no partition on %s", node, c.Name, r.Device))
			}
		}
	}
	return problems
}

// quiesce stops the faults, lets the cluster converge and checks what
// must hold then; "" if it does.
func (s *soak) quiesce() string {
	t := s.t
	s.proxy.SetRate(0)
	for name, n := range s.nodes {
		if s.armed[name] {
			n.restart(t, "")
			s.armed[name] = false
		}
	}
	s.superviseDrivers()
	s.superviseReplicas()
	var why string
	logged := time.Now()
	// kube-scheduler writes a pod's explanation once per attempt and
	// does not retry a failed write; an unschedulable pod is attempted
	// again on a cluster event or after 5 minutes
	// (podMaxInUnschedulablePodsDuration).
	err := pollUntil(6*time.Minute, func() bool {
		s.superviseReplicas()
		snap, err := framework.TakeSnapshot(s.cp.Context(), s.client())
		if err != nil {
			why = err.Error()
		} else {
			// A stock-profile pod may have been left bound without its
			// claims since the last check: it never runs.
			if problems, err := snap.Check(); err == nil {
				s.dropStockWeakness(snap, problems)
			}
			why = unsettled(snap, s.nodes, s.res.upstream, s.res.upstreamClaims)
		}
		if why != "" && time.Since(logged) > 15*time.Second {
			t.Logf("converging: %s", why)
			logged = time.Now()
		}
		return why == ""
	})
	if err != nil {
		return "not converged 6 minutes after the faults stopped: " + why
	}
	snap, err := framework.TakeSnapshot(s.cp.Context(), s.client())
	if err != nil {
		return err.Error()
	}
	problems, err := s.invariants(snap, true)
	if err != nil {
		return err.Error()
	}
	if len(problems) > 0 {
		return "once quiet: " + strings.Join(problems, "; ")
	}
	// Every replica serves metrics; the leader's and a standby's must
	// both come to the recount.
	for _, r := range s.monitors {
		if err := pollUntil(time.Minute, func() bool {
			snap, err := framework.TakeSnapshot(s.cp.Context(), s.client())
			if err != nil {
				why = err.Error()
				return false
			}
			why = compareMonitor(r.base, snap)
			return why == ""
		}); err != nil {
			return fmt.Sprintf("monitor %s: %s", r.id, why)
		}
		s.res.checks++
	}
	return ""
}

func pollUntil(timeout time.Duration, cond func() bool) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
	}
}

// unsettled says why the cluster has not converged: a pod still being
// deleted, a pod bound to a GPU node and not running, a pending pod
// without the scheduler's explanation; "" once every pod is running (or
// bound, on a node without a kubelet) or pending with a reason.
func unsettled(snap *framework.Snapshot, gpuNodes map[string]*gpuNode, upstream, upstreamClaims map[string]bool) string {
	for _, p := range snap.Pods {
		switch {
		case upstream[p.Namespace+"/"+p.Name]:
			// Bound without its claims (dropStockWeakness): it never
			// runs.
		case slices.ContainsFunc(p.Spec.ResourceClaims, func(pc corev1.PodResourceClaim) bool {
			return upstreamClaims[p.Namespace+"/"+podClaim(&p, pc)]
		}):
			// Its claim shares a device with another claim of the stock
			// profile (dropStockWeakness): one of the two cannot be
			// prepared.
		case p.DeletionTimestamp != nil:
			return "pod " + p.Name + " is being deleted"
		case p.Spec.NodeName != "":
			if gpuNodes[p.Spec.NodeName] != nil && p.Status.Phase != corev1.PodRunning {
				return fmt.Sprintf("pod %s on %s is %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		default:
			if !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != ""
			}) {
				return "pod " + p.Name + " is pending without an explanation"
			}
		}
	}
	return ""
}

// compareMonitor recounts from the snapshot what the monitor's metrics at
// base say of every pool's current generation (devices, devices held by
// allocated claims, counters consumed); "" if they agree.
func compareMonitor(base string, snap *framework.Snapshot) string {
	code, body := get(base + "/metrics")
	if code != http.StatusOK {
		return fmt.Sprintf("/metrics: %d", code)
	}
	type poolKey struct{ driver, pool string }
	gen := map[poolKey]int64{}
	for _, sl := range snap.Slices {
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		gen[k] = max(gen[k], sl.Spec.Pool.Generation)
	}
	type devKey struct {
		poolKey
		device string
	}
	devices := map[devKey]*resourcev1.Device{}
	for i := range snap.Slices {
		sl := &snap.Slices[i]
		k := poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}
		if sl.Spec.Pool.Generation != gen[k] {
			continue
		}
		for j := range sl.Spec.Devices {
			devices[devKey{k, sl.Spec.Devices[j].Name}] = &sl.Spec.Devices[j]
		}
	}
	held := map[devKey]bool{}
	for _, c := range snap.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			k := devKey{poolKey{r.Driver, r.Pool}, r.Device}
			if devices[k] != nil && !ptr.Deref(r.AdminAccess, false) {
				held[k] = true
			}
		}
	}
	want := map[string]float64{}
	for k, d := range devices {
		labels := fmt.Sprintf(`driver="%s",pool="%s"`, k.driver, k.pool)
		want[monitor.MetricDevices+"{"+labels+"}"]++
		want[monitor.MetricDevicesAllocated+"{"+labels+"}"] += 0
		if !held[k] {
			continue
		}
		want[monitor.MetricDevicesAllocated+"{"+labels+"}"]++
		for _, cc := range d.ConsumesCounters {
			for n, v := range cc.Counters {
				want[fmt.Sprintf(`%s{counter="%s",counter_set="%s",%s}`, monitor.MetricCounterConsumed, n, cc.CounterSet, labels)] += v.Value.AsApproximateFloat64()
			}
		}
	}
	got := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		for _, m := range []string{monitor.MetricDevices + "{", monitor.MetricDevicesAllocated + "{", monitor.MetricCounterConsumed + "{"} {
			if strings.HasPrefix(line, m) {
				i := strings.LastIndexByte(line, ' ')
				v, err := strconv.ParseFloat(line[i+1:], 64)
				if err != nil {
					return fmt.Sprintf("metric line %q: %v", line, err)
				}
				got[line[:i]] = v
			}
		}
	}
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; (!ok && w != 0) || math.Abs(g-w) > 1e-6*math.Max(1, math.Abs(w)) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, recount %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok && g != 0 {
			diffs = append(diffs, fmt.Sprintf("%s = %v, recount finds no such pool", k, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}
