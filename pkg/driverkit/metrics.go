package driverkit

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names of a driver; every series is labelled driver. Their
// labels and units are in docs/metrics.md.
const (
	MetricHealthEvents = "dractl_driver_health_events_total"
)

// Health events, the event label of MetricHealthEvents.
const (
	HealthEventUnhealthy     = "unhealthy"      // a published device became unhealthy
	HealthEventHealthy       = "healthy"        // an unhealthy device recovered
	HealthEventUnknownDevice = "unknown_device" // the Profile reported a device the driver does not publish
)

// Metrics are a driver's Prometheus metrics, in a registry of their own
// (with Go and process metrics) that Handler serves.
type Metrics struct {
	driver   string
	registry *prometheus.Registry

	healthEvents *prometheus.CounterVec
}

// NewMetrics makes the metrics of a driver.
func NewMetrics(driver string) *Metrics {
	m := &Metrics{driver: driver, registry: prometheus.NewRegistry()}
	m.healthEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricHealthEvents,
		Help: "Health changes the Profile reported: a device became unhealthy, recovered, or is not one the driver publishes.",
	}, []string{"driver", "event"})
	for _, e := range []string{HealthEventUnhealthy, HealthEventHealthy, HealthEventUnknownDevice} {
		m.healthEvents.WithLabelValues(driver, e)
	}
	m.registry.MustRegister(m.healthEvents,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry is where the driver's metrics are registered; a Profile may
// add its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in Prometheus' exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (m *Metrics) healthEvent(event string) {
	m.healthEvents.WithLabelValues(m.driver, event).Inc()
}
