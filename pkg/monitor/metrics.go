package monitor

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dractl/dractl/pkg/state"
)

// Metric names; every pool series is labelled driver and pool.
const (
	MetricPools            = "dractl_pools"
	MetricPoolCondition    = "dractl_pool_condition"
	MetricDevices          = "dractl_pool_devices"
	MetricDevicesAllocated = "dractl_pool_devices_allocated"
	MetricCounterCapacity  = "dractl_pool_counter_capacity"
	MetricCounterConsumed  = "dractl_pool_counter_consumed"
	MetricValidationErrors = "dractl_pool_validation_errors"
	MetricSyncs            = "dractl_monitor_syncs_total"
	MetricLastSync         = "dractl_monitor_last_sync_timestamp_seconds"
	MetricEvents           = "dractl_monitor_events_total"
)

var (
	descPools = prometheus.NewDesc(MetricPools,
		"Resource pools by condition: ok, incomplete (skipped by the scheduler) or invalid (unusable).", []string{"condition"}, nil)
	descCondition = prometheus.NewDesc(MetricPoolCondition,
		"1 for the pool's current condition.", []string{"driver", "pool", "condition"}, nil)
	descDevices = prometheus.NewDesc(MetricDevices,
		"Devices the pool's current generation publishes.", []string{"driver", "pool"}, nil)
	descAllocated = prometheus.NewDesc(MetricDevicesAllocated,
		"Devices of the pool held by allocated ResourceClaims (admin access not counted).", []string{"driver", "pool"}, nil)
	descCapacity = prometheus.NewDesc(MetricCounterCapacity,
		"Capacity of a shared counter.", []string{"driver", "pool", "counter_set", "counter"}, nil)
	descConsumed = prometheus.NewDesc(MetricCounterConsumed,
		"Amount of a shared counter consumed by allocated devices.", []string{"driver", "pool", "counter_set", "counter"}, nil)
	descValidation = prometheus.NewDesc(MetricValidationErrors,
		"Problems of an invalid pool by reason (the field error type, e.g. FieldValueDuplicate).", []string{"driver", "pool", "reason"}, nil)
)

// metrics is the monitor's registry. Pool series are computed at scrape
// time from the last sync (a collector, not gauges kept up to date), so
// pools that disappear leave no stale series.
type metrics struct {
	m        *Monitor
	registry *prometheus.Registry
	syncs    prometheus.Counter
	lastSync prometheus.Gauge
	events   *prometheus.CounterVec
}

func newMetrics(m *Monitor) *metrics {
	x := &metrics{
		m:        m,
		registry: prometheus.NewRegistry(),
		syncs:    prometheus.NewCounter(prometheus.CounterOpts{Name: MetricSyncs, Help: "Times the pools were recomputed."}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastSync, Help: "When the pools were last recomputed."}),
		events:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricEvents, Help: "Events emitted, by reason."}, []string{"reason"}),
	}
	x.registry.MustRegister(x, x.syncs, x.lastSync, x.events,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return x
}

func (x *metrics) handler() http.Handler {
	return promhttp.HandlerFor(x.registry, promhttp.HandlerOpts{Registry: x.registry})
}

// Describe implements prometheus.Collector.
func (x *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPools, descCondition, descDevices, descAllocated, descCapacity, descConsumed, descValidation} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (x *metrics) Collect(ch chan<- prometheus.Metric) {
	x.m.mu.RLock()
	statuses := x.m.current
	x.m.mu.RUnlock()
	byCondition := map[state.Condition]int{state.PoolOK: 0, state.PoolIncomplete: 0, state.PoolInvalid: 0}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range statuses {
		u := s.usage
		byCondition[s.condition]++
		gauge(descCondition, 1, u.Driver, u.ID.Pool, string(s.condition))
		gauge(descDevices, float64(len(u.Devices)), u.Driver, u.ID.Pool)
		gauge(descAllocated, float64(u.Allocated()), u.Driver, u.ID.Pool)
		for _, cs := range u.CounterSets {
			for _, c := range cs.Counters {
				gauge(descCapacity, c.Capacity.AsApproximateFloat64(), u.Driver, u.ID.Pool, cs.Name, c.Name)
				gauge(descConsumed, c.Consumed.AsApproximateFloat64(), u.Driver, u.ID.Pool, cs.Name, c.Name)
			}
		}
		if s.condition == state.PoolInvalid && u.Invalid != nil {
			reasons := map[string]int{}
			for _, p := range u.Invalid.Problems {
				reasons[string(p.Err.Type)]++
			}
			for r, n := range reasons {
				gauge(descValidation, float64(n), u.Driver, u.ID.Pool, r)
			}
		}
	}
	for c, n := range byCondition {
		gauge(descPools, float64(n), string(c))
	}
}
