// Package monitor is the pool monitor: a controller that watches
// ResourceSlices and ResourceClaims, checks every pool the way the
// allocator would (KEP-4815 "Validation": a pool that breaks a rule
// spanning its slices is unusable; an incomplete one is skipped), reports
// pools that become invalid or stay incomplete past a grace period as
// events.k8s.io/v1 Events on their slices and nodes, reports recovery the
// same way, and serves Prometheus metrics of every pool's state, devices
// and counters.
//
// Every replica watches and serves metrics; only the leader (see
// RunWithLeaderElection) emits Events, so that a highly available
// deployment reports each problem once.
package monitor

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/state/informer"
	"github.com/dractl/dractl/pkg/internal/resourceapi"
	"github.com/dractl/dractl/pkg/ops/live"
)

// Component is the name the monitor reports Events and leases under.
const Component = "dractl-monitor"

// DefaultIncompleteGrace is how long a pool may stay incomplete before it
// is reported: a driver publishing a new generation leaves its pool
// incomplete for a moment, which is normal.
const DefaultIncompleteGrace = 5 * time.Minute

// Options configure a Monitor.
type Options struct {
	Client kubernetes.Interface
	// IncompleteGrace defaults to DefaultIncompleteGrace.
	IncompleteGrace time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Recorder emits the Events; nil means events.k8s.io/v1 through Client.
	Recorder events.EventRecorder
}

// Monitor watches pools. Create it with New, then call Run.
type Monitor struct {
	opts Options
	// The informers of slices and claims, made one by one rather than by
	// client-go's SharedInformerFactory: the factory's ForResource names
	// an informer of every API group, which links them all into the
	// binary that runs the monitor (dractl).
	slices, claims cache.SharedIndexInformer
	st             *state.State
	// sliceDeltas and claimDeltas feed the State from the informers and
	// mark what they changed.
	sliceDeltas informer.Deltas[*resourcev1.ResourceSlice]
	claimDeltas informer.Deltas[*resourcev1.ResourceClaim]
	logger      klog.Logger

	changed  chan struct{}
	recorder events.EventRecorder

	leading atomic.Bool
	// relead is set when leadership is gained: problems found before are
	// reported again, since the previous leader may not have.
	relead atomic.Bool
	ready  atomic.Bool

	mu      sync.RWMutex
	current []poolStatus // the last sync's result, for the metrics

	dirtyMu sync.Mutex
	dirty   map[pool.ID]bool // pools changed since the last sync
	// regressed are the pools a slice of which went back to an older
	// generation since the last sync, with the first such change.
	regressed map[pool.ID]regression

	tracked map[pool.ID]*tracked // sync goroutine only
	metrics *metrics
}

// poolStatus is one pool as the last sync saw it.
type poolStatus struct {
	usage     *state.PoolUsage
	condition state.Condition
	reason    string
	series    *poolSeries // what /metrics serves for the pool
	// tainted are the devices a taint keeps claims off (taints.go).
	tainted map[string]deviceTaint
}

// tracked is what the monitor remembers of a pool between syncs.
type tracked struct {
	condition state.Condition
	reason    string
	since     time.Time // when the pool entered condition
	// reported is the condition+reason an Event was emitted for; empty
	// when nothing is reported (an ok pool, or a problem in its grace
	// period).
	reported string
	// regressionReported: PoolGenerationRegressed was emitted.
	regressionReported bool
	// taints are the device taints reported (DeviceTainted).
	taints map[string]deviceTaint
}

// New creates a monitor; nothing runs until Run. It fails when an
// informer refuses the monitor's event handlers.
func New(opts Options) (*Monitor, error) {
	if opts.IncompleteGrace == 0 {
		opts.IncompleteGrace = DefaultIncompleteGrace
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Monitor{
		opts:      opts,
		st:        state.New(state.Options{}),
		changed:   make(chan struct{}, 1),
		tracked:   map[pool.ID]*tracked{},
		dirty:     map[pool.ID]bool{},
		regressed: map[pool.ID]regression{},
		logger:    klog.Background().WithName(Component),
	}
	m.recorder = opts.Recorder
	m.metrics = newMetrics(m)
	// What the factory would make: no resync, the namespace index, one
	// transform for both.
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	m.slices = resourceinformers.NewResourceSliceInformer(opts.Client, 0, indexers)
	m.claims = resourceinformers.NewResourceClaimInformer(opts.Client, metav1.NamespaceAll, 0, indexers)
	transform := trim(live.NewSharer())
	for _, inf := range []cache.SharedIndexInformer{m.slices, m.claims} {
		if err := inf.SetTransform(transform); err != nil {
			return nil, err
		}
	}
	m.sliceDeltas = informer.Slices(m.st)
	m.sliceDeltas.Then = func(d informer.Delta[*resourcev1.ResourceSlice]) {
		// An update may move a slice to another pool.
		if d.Old != nil {
			m.mark(poolOf(d.Old))
			m.noteRegression(d)
		}
		m.mark(poolOf(d.Obj))
		m.poke()
	}
	// A conflicting allocation (two claims on one device) cannot be
	// stored; the claim's previous state stays until the API settles.
	m.claimDeltas = informer.Claims(m.st)
	m.claimDeltas.Then = func(d informer.Delta[*resourcev1.ResourceClaim]) {
		m.markClaim(d.Old)
		m.markClaim(d.Obj)
		m.poke()
	}
	if _, err := informer.Watch(m.logger, m.slices, m.sliceDeltas); err != nil {
		return nil, err
	}
	if _, err := informer.Watch(m.logger, m.claims, m.claimDeltas); err != nil {
		return nil, err
	}
	return m, nil
}

// Handler serves /metrics, /healthz and /readyz. /readyz fails until the
// informers have synced and the first pools have been computed.
func (m *Monitor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.metrics.handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Ready reports whether the monitor has synced and computed the pools.
func (m *Monitor) Ready() bool { return m.ready.Load() }

// SetLeading turns Event reporting on or off; RunWithLeaderElection calls
// it. A monitor run without leader election should call SetLeading(true).
func (m *Monitor) SetLeading(on bool) {
	if on && !m.leading.Load() {
		m.relead.Store(true)
	}
	m.leading.Store(on)
	m.poke()
}

// Run starts the informers, waits for them to sync and keeps the pools
// up to date until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if m.recorder == nil {
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: m.opts.Client.EventsV1()})
		b.StartRecordingToSink(ctx.Done())
		defer b.Shutdown()
		m.recorder = b.NewRecorder(clientgoscheme.Scheme, Component)
	}
	// A server that does not serve resource.k8s.io/v1 (older than 1.34)
	// answers the informers' lists with NotFound, again and again: Run
	// ends with an error naming the API instead, the first of the
	// resources it reads that is not served (the same whichever informer
	// fails first).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	notServed := func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsNotFound(err) {
			for _, resource := range []string{"resourceslices", "resourceclaims"} {
				if nerr := resourceapi.Require(m.opts.Client.Discovery(), resource); resourceapi.IsNotServed(nerr) {
					cancel(nerr)
					return
				}
			}
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
	// Every return below comes once ctx has ended, which stops the
	// informers; Run returns when they have.
	var informers sync.WaitGroup
	defer informers.Wait()
	for _, inf := range []cache.SharedIndexInformer{m.slices, m.claims} {
		if err := inf.SetWatchErrorHandlerWithContext(notServed); err != nil {
			return err
		}
		informers.Go(func() { inf.RunWithContext(ctx) })
	}
	for name, inf := range map[string]cache.SharedIndexInformer{"ResourceSlices": m.slices, "ResourceClaims": m.claims} {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			if err := context.Cause(ctx); resourceapi.IsNotServed(err) {
				return err
			}
			return fmt.Errorf("informer for %s did not sync: %w", name, ctx.Err())
		}
	}
	logger.Info("Informers synced; watching pools")
	m.sync()
	m.ready.Store(true)
	timer := m.opts.Clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := m.nextDeadline()
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(m.opts.Clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.changed:
		case <-timer.C():
		}
		m.sync()
	}
}

// poke asks the sync loop to run; signals arriving while it runs collapse
// into one more run.
func (m *Monitor) poke() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

func poolOf(s *resourcev1.ResourceSlice) pool.ID {
	return pool.ID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}
}

// mark records that a pool changed since the last sync.
func (m *Monitor) mark(id pool.ID) {
	m.dirtyMu.Lock()
	m.dirty[id] = true
	m.dirtyMu.Unlock()
}

// noteRegression remembers an update that moved a slice back to an older
// generation of its pool. Generations only grow (KEP-4815: a driver
// raises the generation to replace a pool's slices); one going back means
// a driver restored from an old state or two writers of one pool, and
// whoever remembers the highest generation seen ignores the pool's
// slices from then on.
func (m *Monitor) noteRegression(d informer.Delta[*resourcev1.ResourceSlice]) {
	if d.Deleted || d.Err != nil || poolOf(d.Old) != poolOf(d.Obj) || d.Obj.Spec.Pool.Generation >= d.Old.Spec.Pool.Generation {
		return
	}
	id := poolOf(d.Obj)
	m.dirtyMu.Lock()
	defer m.dirtyMu.Unlock()
	if _, ok := m.regressed[id]; !ok {
		m.regressed[id] = regression{slice: d.Obj.Name, from: d.Old.Spec.Pool.Generation, to: d.Obj.Spec.Pool.Generation}
	}
}

// markClaim marks the pools a claim's allocation (if any) takes devices
// from.
func (m *Monitor) markClaim(c *resourcev1.ResourceClaim) {
	if c == nil || c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		m.mark(pool.ID{Driver: r.Driver, Pool: r.Pool})
	}
}

// sync recomputes the pools that changed since the last sync (all of them
// the first time), publishes the result to the metrics and reports what
// changed. A pool nothing touched keeps its previous usage, so that a
// slice change on a cluster of thousands of nodes costs one pool.
func (m *Monitor) sync() {
	m.dirtyMu.Lock()
	dirty, all := m.dirty, m.current == nil
	m.dirty = map[pool.ID]bool{}
	regressed := m.regressed
	if len(regressed) > 0 {
		m.regressed = map[pool.ID]regression{}
	}
	m.dirtyMu.Unlock()
	m.mu.RLock()
	prev := make(map[pool.ID]*poolStatus, len(m.current))
	for i := range m.current {
		prev[m.current[i].usage.ID] = &m.current[i]
	}
	m.mu.RUnlock()
	snap := m.st.Snapshot()
	pools := snap.Pools()
	statuses := make([]poolStatus, 0, len(pools))
	for _, p := range pools {
		if old := prev[p.ID]; old != nil && !all && !dirty[p.ID] {
			statuses = append(statuses, *old)
			continue
		}
		u := snap.Usage(p.ID)
		c, why := u.Condition()
		st := poolStatus{usage: u, condition: c, reason: why, tainted: taintedDevices(u)}
		st.series = renderPool(&st)
		statuses = append(statuses, st)
	}
	m.mu.Lock()
	m.current = statuses
	m.mu.Unlock()
	m.metrics.syncs.Inc()
	m.metrics.lastSync.Set(float64(m.opts.Clock.Now().UnixNano()) / 1e9)
	m.report(statuses)
	m.reportRegressions(statuses, regressed)
}

// nextDeadline is when the oldest unreported incomplete pool's grace
// period ends, or zero.
func (m *Monitor) nextDeadline() time.Time {
	var next time.Time
	for _, t := range m.tracked {
		if t.condition != state.PoolIncomplete || t.reported != "" {
			continue
		}
		d := t.since.Add(m.opts.IncompleteGrace)
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next
}
