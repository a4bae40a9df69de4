package schedplugin

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/state/informer"
)

// The plugin's metrics, registered in kube-scheduler's registry
// (legacyregistry), so that its /metrics serves them beside its own.
// Every series is labelled with the scheduling profile; docs/metrics.md
// has them all.
const (
	MetricAllocationAttempts = "dractl_scheduler_allocation_attempts_total"
	MetricAllocationOutcomes = "dractl_scheduler_allocation_outcomes_total"
	MetricStateDeltas        = "dractl_scheduler_state_deltas_total"
	MetricMemoizedAnswers    = "dractl_scheduler_memoized_answers_total"
	MetricAssumptions        = "dractl_scheduler_assumptions"
	MetricAssumptionsExpired = "dractl_scheduler_assumptions_expired_total"
)

// Kinds of claims, the claim_kind label.
const (
	ClaimKindPod              = "pod"               // a claim the pod owns (from its template)
	ClaimKindShared           = "shared"            // a claim the pod names and does not own
	ClaimKindPodGroup         = "pod_group"         // a claim reserved for the pod's PodGroup
	ClaimKindExtendedResource = "extended_resource" // the pod's extended-resource claim (KEP-5004)
)

// Outcomes of an allocation, the outcome label.
const (
	OutcomeReserved      = "reserved"      // Reserve assumed the allocation on the chosen node
	OutcomeUnschedulable = "unschedulable" // no node fit the pod
	OutcomeWritten       = "written"       // PreBind stored the allocation
	OutcomeUnreserved    = "unreserved"    // the binding failed and the allocation was dropped
)

var (
	allocationAttempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           MetricAllocationAttempts,
		Help:           "Claims of a pod the plugin set out to allocate in a scheduling cycle (PreFilter), by kind of claim.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "claim_kind"})
	allocationOutcomes = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           MetricAllocationOutcomes,
		Help:           "What became of the claims the plugin allocated: reserved, unschedulable, written, unreserved; by kind of claim.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "claim_kind", "outcome"})
	stateDeltas = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           MetricStateDeltas,
		Help:           "Informer events the plugin's State applied or refused (result), by kind of object.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile", "kind", "result"})
	assumptionsExpired = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           MetricAssumptionsExpired,
		Help:           "Assumed allocations dropped because they were neither in flight nor written any more (a hold that ran out, another plugin's binding that failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"profile"})

	memoizedDesc    = metrics.NewDesc(MetricMemoizedAnswers, "Answers of a node to a cycle, remembered from an earlier cycle (hit) or computed by the allocator (miss).", []string{"profile", "result"}, nil, metrics.ALPHA, "")
	assumptionsDesc = metrics.NewDesc(MetricAssumptions, "Allocations the plugin's State holds assumed: in flight, or written and not yet seen.", []string{"profile"}, nil, metrics.ALPHA, "")

	states = &stateCollector{states: map[string]*state.State{}}
	// registerOnce: the metrics are process-wide (legacyregistry) while
	// a plugin is made per profile and again after a restart in the
	// process; registering twice panics. The profiles' States are not
	// added under it: every plugin made adds its own, under states.mu.
	registerOnce sync.Once
)

// registerMetrics registers the metrics once per process, and the
// profile's State for the gauges read from it.
func registerMetrics(profile string, st *state.State) {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(allocationAttempts, allocationOutcomes, stateDeltas, assumptionsExpired)
		legacyregistry.CustomMustRegister(states)
	})
	states.mu.Lock()
	defer states.mu.Unlock()
	// A profile's latest plugin (a scheduler restarted in the process
	// replaces it).
	states.states[profile] = st
}

// stateCollector reads what the profiles' States count when scraped.
type stateCollector struct {
	metrics.BaseStableCollector
	// mu guards states: plugins register while a scrape reads. Nothing
	// else of the plugin's is read during a scrape.
	mu     sync.Mutex
	states map[string]*state.State
}

func (c *stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- memoizedDesc
	ch <- assumptionsDesc
}

func (c *stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for profile, st := range c.states {
		memo := st.MemoStats()
		ch <- metrics.NewLazyConstMetric(memoizedDesc, metrics.CounterValue, float64(memo.Hits), profile, "hit")
		ch <- metrics.NewLazyConstMetric(memoizedDesc, metrics.CounterValue, float64(memo.Misses), profile, "miss")
		ch <- metrics.NewLazyConstMetric(assumptionsDesc, metrics.GaugeValue, float64(st.NumAssumed()), profile)
	}
}

// claimKind is the claim_kind of one of a pod's claims.
func claimKind(pod *v1.Pod, pc podClaim) string {
	switch {
	case pc.extended:
		return ClaimKindExtendedResource
	case pc.consumer.Resource != "" && pc.consumer.Resource != "pods":
		return ClaimKindPodGroup
	case resourceclaim.IsForPod(pod, pc.claim, false) == nil:
		return ClaimKindPod
	}
	return ClaimKindShared
}

// countPending counts an event for each claim the cycle allocates: with
// outcome "" an attempt, else that outcome.
func (pl *Plugin) countPending(pod *v1.Pod, s *cycleState, outcome string, extended bool) {
	profile := pl.fh.ProfileName()
	count := func(kind string) {
		if outcome == "" {
			allocationAttempts.WithLabelValues(profile, kind).Inc()
		} else {
			allocationOutcomes.WithLabelValues(profile, kind, outcome).Inc()
		}
	}
	for _, i := range s.pending {
		count(claimKind(pod, s.claims[i]))
	}
	if extended {
		count(ClaimKindExtendedResource)
	}
}

// countDeltas counts the State's answer to each informer event of kind,
// then calls then (if set).
func countDeltas[T any](profile, kind string, then func(informer.Delta[T])) func(informer.Delta[T]) {
	applied := stateDeltas.WithLabelValues(profile, kind, "applied")
	refused := stateDeltas.WithLabelValues(profile, kind, "refused")
	return func(d informer.Delta[T]) {
		if d.Err != nil {
			refused.Inc()
		} else {
			applied.Inc()
		}
		if then != nil {
			then(d)
		}
	}
}
