package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/testgen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// The hostile publisher of TestHostileSlices.
const (
	churnDriver  = "churn.example.com"
	churnPools   = 1000
	churnWorkers = 4
	// regressPool goes back a generation every round, on node-1.
	regressPool = "regress"
)

// TestHostileSlices publishes, against kube-apiserver and under
// dractl-scheduler and the monitor, slices that admission accepts but
// that are hostile: the largest plain slices resource.k8s.io/v1 allows
// (testgen's worst cases, the largest updated every round), a thousand
// pools on every node republished with a new generation and attribute
// every second (as fast as kube-apiserver takes them where a round of them
// takes longer), and a pool whose generation goes back every second. While
// that goes on a pod with a claim must still be scheduled and allocated,
// the monitor must serve metrics covering every pool, and exactly one
// Event must name the regressed pool however many rounds it regresses.
func TestHostileSlices(t *testing.T) {
	cp := startScheduling(t)
	base, _ := startMonitor(t, cp, 5*time.Second)
	createNodes(t, cp, "node-1")
	plainClass(t, cp)
	ctx := cp.Context()
	if _, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, plainSlice("node-1", 1, devNames(2)...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createTemplate(t, cp, "one", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{request("dev", "plain", 1)}})

	// The publisher writes as fast as kube-apiserver takes it, not as
	// client-go's default five requests a second would let it.
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startChurn(t, ctx, client)

	// The pod is created once every pool has been republished twice.
	waitFor(t, time.Minute, "two rounds of republishing", func(context.Context) (bool, error) {
		return c.rounds.Load() >= 2, c.failed()
	})
	atCreate := c.updates.Load()
	createClaimPod(t, cp, "worker", dractlProfile, "one", "")
	// A generous bound: responsive, not fast (benchmarks measure speed).
	waitBound(t, cp, 1, 2*time.Minute)
	if err := c.failed(); err != nil {
		t.Fatal(err)
	}
	claim := claimOf(t, cp, "worker")
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 || claim.Status.Allocation.Devices.Results[0].Driver != plainDriver {
		t.Fatalf("claim %s: allocation %+v, want one %s device", claim.Name, claim.Status.Allocation, plainDriver)
	}
	t.Logf("the pod was bound after %d slice updates since its creation", c.updates.Load()-atCreate)

	e := waitEvent(t, cp, monitor.ReasonPoolGenerationRegressed, regressPool)
	if want := "pool " + churnDriver + "/" + regressPool + " went back"; !strings.Contains(e.Note, want) {
		t.Errorf("the Event says %q, want it to name the pool (%q)", e.Note, want)
	}

	// Three more rounds: the monitor still serves every pool, and the
	// pool that keeps going back is still one Event.
	more := c.rounds.Load() + 3
	waitFor(t, time.Minute, "three more rounds", func(context.Context) (bool, error) {
		return c.rounds.Load() >= more, c.failed()
	})
	code, body := get(base + "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	served := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, fmt.Sprintf(`%s{driver=%q,pool="churn-`, monitor.MetricDevices, churnDriver)) {
			served++
		}
	}
	if served != churnPools {
		t.Errorf("/metrics serves %d of the %d republished pools", served, churnPools)
	}
	for _, p := range [][2]string{{churnDriver, regressPool}, {c.largest.Spec.Driver, c.largest.Spec.Pool.Name}} {
		if line := metric(t, base, monitor.MetricDevices, fmt.Sprintf("driver=%q,pool=%q", p[0], p[1])); line == "" {
			t.Errorf("/metrics does not serve pool %s/%.20s...", p[0], p[1])
		}
	}
	list, err := cp.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	regressions := 0
	for _, e := range list.Items {
		if e.Reason == monitor.ReasonPoolGenerationRegressed {
			regressions++
			if e.Regarding.Name != regressPool {
				t.Errorf("a regression reported on %s, which never went back", e.Regarding.Name)
			}
		}
	}
	if rounds := c.rounds.Load(); regressions != 1 {
		t.Errorf("%d %s Events after %d rounds of going back, want 1", regressions, monitor.ReasonPoolGenerationRegressed, rounds)
	}
	c.stop(t)
	t.Logf("%d rounds, %d slice updates", c.rounds.Load(), c.updates.Load())
}

// churn republishes its slices round after round, a round at most every
// second, until stopped.
type churn struct {
	client kubernetes.Interface
	rounds atomic.Int64
	errMu  sync.Mutex
	err    error
	cancel context.CancelFunc
	done   chan struct{}
	// The last version written of each slice, which the next round
	// updates (no read between writes).
	pools   []*resourcev1.ResourceSlice
	regress *resourcev1.ResourceSlice
	largest *resourcev1.ResourceSlice
	updates atomic.Int64
}

func startChurn(t *testing.T, ctx context.Context, client kubernetes.Interface) *churn {
	t.Helper()
	c := &churn{client: client, done: make(chan struct{})}
	slices := client.ResourceV1().ResourceSlices()
	create := func(s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
		t.Helper()
		out, err := slices.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating slice %.40s...: %v", s.Name, err)
		}
		return out
	}
	// The largest slices v1 allows: 128 devices of 32 attributes of the
	// longest strings; 64 devices with the most taints and consumed
	// counters; the most counter sets.
	for shape, s := range testgen.WorstCaseFlat(testgen.StringAttributes) {
		v1, err := api.ToUpstream(s)
		if err != nil {
			t.Fatal(err)
		}
		created := create(v1)
		if shape == "devices" {
			c.largest = created
		}
	}
	for i := range churnPools {
		name := fmt.Sprintf("churn-%03d", i)
		c.pools = append(c.pools, create(&resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: churnDriver, AllNodes: ptr.To(true),
				Pool:    resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "dev-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"round": {IntValue: ptr.To[int64](0)}}}}},
		}))
	}
	c.regress = create(&resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: regressPool},
		Spec: resourcev1.ResourceSliceSpec{Driver: churnDriver, NodeName: ptr.To("node-1"),
			Pool:    resourcev1.ResourcePool{Name: regressPool, Generation: 1 << 20, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "dev-0"}}},
	})

	ctx, c.cancel = context.WithCancel(ctx)
	go c.run(ctx)
	t.Cleanup(func() { c.stop(t) })
	return c
}

func (c *churn) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	slices := c.client.ResourceV1().ResourceSlices()
	for round := int64(1); ; round++ {
		update := func(s **resourcev1.ResourceSlice, change func(*resourcev1.ResourceSlice)) bool {
			next := (*s).DeepCopy()
			change(next)
			out, err := slices.Update(ctx, next, metav1.UpdateOptions{})
			if err != nil {
				if ctx.Err() == nil {
					c.fail(fmt.Errorf("round %d: updating slice %.40s: %w", round, next.Name, err))
				}
				return false
			}
			*s = out
			c.updates.Add(1)
			return true
		}
		var wg sync.WaitGroup
		for w := range churnWorkers {
			wg.Go(func() {
				for i := w; i < len(c.pools); i += churnWorkers {
					if !update(&c.pools[i], func(s *resourcev1.ResourceSlice) {
						s.Spec.Pool.Generation++
						s.Spec.Devices[0].Attributes["round"] = resourcev1.DeviceAttribute{IntValue: ptr.To(round)}
					}) {
						return
					}
				}
			})
		}
		wg.Wait()
		if !update(&c.regress, func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Generation-- }) ||
			!update(&c.largest, func(s *resourcev1.ResourceSlice) { s.Spec.Pool.Generation++ }) {
			return
		}
		if c.failed() != nil {
			return
		}
		c.rounds.Store(round)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *churn) fail(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *churn) failed() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// stop ends the churn and fails the test if a write was refused.
func (c *churn) stop(t testing.TB) {
	c.cancel()
	<-c.done
	if err := c.failed(); err != nil {
		t.Error(err)
		c.errMu.Lock()
		c.err = nil // reported once
		c.errMu.Unlock()
	}
}
