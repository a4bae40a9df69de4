package monitor

import (
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metric names; every pool series is labelled driver and pool.
const (
	MetricPools            = "dractl_pools"
	MetricPoolCondition    = "dractl_pool_condition"
	MetricDevices          = "dractl_pool_devices"
	MetricDevicesAllocated = "dractl_pool_devices_allocated"
	MetricDevicesTainted   = "dractl_pool_devices_tainted"
	MetricCounterCapacity  = "dractl_pool_counter_capacity"
	MetricCounterConsumed  = "dractl_pool_counter_consumed"
	MetricValidationErrors = "dractl_pool_validation_errors"
	MetricSyncs            = "dractl_monitor_syncs_total"
	MetricLastSync         = "dractl_monitor_last_sync_timestamp_seconds"
	MetricEvents           = "dractl_monitor_events_total"
)

// metrics is the monitor's registry and the pool series. Pool series are
// served from the last sync (rendered then, not gauges kept up to date), so
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
	// Every reason from the start: a rate over a series that appears with
	// its first Event misses that Event.
	for _, r := range []string{ReasonPoolInvalid, ReasonPoolIncomplete, ReasonPoolRecovered, ReasonPoolGenerationRegressed, ReasonDeviceTainted, ReasonDeviceUntainted} {
		x.events.WithLabelValues(r)
	}
	x.registry.MustRegister(x.syncs, x.lastSync, x.events,
		// go_gc_heap_live_bytes (the heap the last collection kept) sizes the
		// monitor's memory limit better than the allocation counters do.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return x
}

func (x *metrics) handler() http.Handler { return x }
