package driverkit

import (
	"context"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/dractl/dractl/pkg/driver/prepare"
)

// Metric names of a driver; every series is labelled driver. docs/metrics.md
// has them all, with their labels and units.
const (
	MetricOperationDuration = "dractl_driver_operation_duration_seconds"
	MetricOperationErrors   = "dractl_driver_operation_errors_total"
	MetricRequestsInFlight  = "dractl_driver_requests_in_flight"
	MetricPreparedClaims    = "dractl_driver_prepared_claims"
	MetricPartitions        = "dractl_driver_partitions"
	MetricPublishDuration   = "dractl_driver_publish_duration_seconds"
	MetricPublishFailures   = "dractl_driver_publish_failures_total"
	MetricHealthEvents      = "dractl_driver_health_events_total"
)

// Operations, the operation label of the prepare and unprepare metrics.
const (
	OperationPrepare   = "prepare"
	OperationUnprepare = "unprepare"
)

// Health events, the event label of MetricHealthEvents.
const (
	HealthEventUnhealthy     = "unhealthy"      // a published device became unhealthy
	HealthEventHealthy       = "healthy"        // an unhealthy device recovered
	HealthEventUnknownDevice = "unknown_device" // the Profile reported a device the driver does not publish
)

// LabelProfile is a Profile that names the kind of partition it makes of
// a device (a MIG profile such as 1g.5gb, or full for a whole GPU): the
// profile label of MetricPartitions, "device" for a Profile without.
type LabelProfile interface {
	prepare.Profile
	PartitionProfile(dev prepare.AllocatedDevice) string
}

// Metrics are a driver's Prometheus metrics, in a registry of their own
// (with Go and process metrics) that Handler serves.
type Metrics struct {
	driver   string
	registry *prometheus.Registry

	duration     *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	inFlight     *prometheus.GaugeVec
	publish      *prometheus.HistogramVec
	publishFails *prometheus.CounterVec
	healthEvents *prometheus.CounterVec
	kit          *kitCollector
}

// NewMetrics makes the metrics of a driver.
func NewMetrics(driver string) *Metrics {
	m := &Metrics{driver: driver, registry: prometheus.NewRegistry(), kit: &kitCollector{driver: driver}}
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricOperationDuration,
		Help:    "Time to prepare or unprepare one claim, failures included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5 ms to 41 s
	}, []string{"driver", "operation"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricOperationErrors,
		Help: "Claims whose prepare or unprepare failed, by reason: conflict, not_allocated, config, partition, cdi, checkpoint, other.",
	}, []string{"driver", "operation", "reason"})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricRequestsInFlight,
		Help: "The kubelet's prepare and unprepare requests being served.",
	}, []string{"driver", "operation"})
	m.publish = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricPublishDuration,
		Help:    "Time of each ResourceSlice write the driver makes to publish its devices, by operation: create, update, delete.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12), // 5 ms to 10 s
	}, []string{"driver", "operation"})
	m.publishFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricPublishFailures,
		Help: "ResourceSlice writes of the driver that failed (conflict, forbidden, invalid, unavailable, other) and slices stored without fields the server does not serve (dropped_fields); each is retried.",
	}, []string{"driver", "reason"})
	m.healthEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricHealthEvents,
		Help: "Health changes the Profile reported: a device became unhealthy, recovered, or is not one the driver publishes.",
	}, []string{"driver", "event"})
	for _, op := range []string{OperationPrepare, OperationUnprepare} {
		m.duration.WithLabelValues(driver, op)
		m.inFlight.WithLabelValues(driver, op)
		for _, r := range prepare.Reasons() {
			m.errors.WithLabelValues(driver, op, r)
		}
	}
	for _, op := range []string{"create", "update", "delete"} {
		m.publish.WithLabelValues(driver, op)
	}
	for _, r := range publishFailures {
		m.publishFails.WithLabelValues(driver, r)
	}
	for _, e := range []string{HealthEventUnhealthy, HealthEventHealthy, HealthEventUnknownDevice} {
		m.healthEvents.WithLabelValues(driver, e)
	}
	m.registry.MustRegister(m.duration, m.errors, m.inFlight, m.publish, m.publishFails, m.healthEvents, m.kit,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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

// request counts one of the kubelet's requests in flight until the
// returned function is called.
func (m *Metrics) request(op string) func() {
	g := m.inFlight.WithLabelValues(m.driver, op)
	g.Inc()
	return g.Dec
}

// claimDone records one claim's prepare or unprepare.
func (m *Metrics) claimDone(op string, start time.Time, err error) {
	m.duration.WithLabelValues(m.driver, op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(m.driver, op, prepare.ReasonOf(err)).Inc()
	}
}

func (m *Metrics) publishFailed(reason string) {
	m.publishFails.WithLabelValues(m.driver, reason).Inc()
}

// kitCollector reports what the kit holds when scraped: prepared claims
// and their partitions by profile.
type kitCollector struct {
	driver string
	// profile names the kind of each partition; nil for a Profile that
	// is no LabelProfile.
	profile LabelProfile
	kit     atomic.Pointer[prepare.Kit]
}

var (
	preparedDesc   = prometheus.NewDesc(MetricPreparedClaims, "Claims the driver holds prepared on its node.", []string{"driver"}, nil)
	partitionsDesc = prometheus.NewDesc(MetricPartitions, "Partitions of prepared claims on the node, by the Profile's name for their kind (a MIG profile, full for a whole GPU; device for a Profile that names none).", []string{"driver", "profile"}, nil)
)

// start has the collector report kit, whose Profile is profile. The
// profile is set before the kit is stored, so a scrape that sees the kit
// sees it too.
func (c *kitCollector) start(kit *prepare.Kit, profile prepare.Profile) {
	c.profile, _ = profile.(LabelProfile)
	c.kit.Store(kit)
}

func (c *kitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- preparedDesc
	ch <- partitionsDesc
}

func (c *kitCollector) Collect(ch chan<- prometheus.Metric) {
	claims, parts := 0, map[string]int{}
	if k := c.kit.Load(); k != nil {
		prepared := k.Prepared()
		claims = len(prepared)
		for _, devs := range prepared {
			for _, d := range devs {
				if d.Partition == nil {
					continue
				}
				profile := "device"
				if c.profile != nil {
					profile = c.profile.PartitionProfile(d.AllocatedDevice)
				}
				parts[profile]++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(preparedDesc, prometheus.GaugeValue, float64(claims), c.driver)
	for p, n := range parts {
		ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(n), c.driver, p)
	}
}

// meteredClient is the driver's API client with its ResourceSlice writes
// timed and their failures counted: what the resourceslice controller
// does to publish.
type meteredClient struct {
	kubernetes.Interface
	m *Metrics
}

// IsWatchListSemanticsUnSupported passes on what the wrapped client says
// (a fake clientset cannot stream lists); informers ask.
func (c meteredClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c meteredClient) ResourceV1() resourceclient.ResourceV1Interface {
	return meteredResourceV1{c.Interface.ResourceV1(), c.m}
}

type meteredResourceV1 struct {
	resourceclient.ResourceV1Interface
	m *Metrics
}

func (r meteredResourceV1) ResourceSlices() resourceclient.ResourceSliceInterface {
	return meteredSlices{r.ResourceV1Interface.ResourceSlices(), r.m}
}

type meteredSlices struct {
	resourceclient.ResourceSliceInterface
	m *Metrics
}

func (s meteredSlices) done(op string, start time.Time, err error) {
	s.m.publish.WithLabelValues(s.m.driver, op).Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.publishFailed(publishFailure(err))
	}
}

func (s meteredSlices) Create(ctx context.Context, slice *resourcev1.ResourceSlice, opts metav1.CreateOptions) (*resourcev1.ResourceSlice, error) {
	start := time.Now()
	out, err := s.ResourceSliceInterface.Create(ctx, slice, opts)
	s.done("create", start, err)
	return out, err
}

func (s meteredSlices) Update(ctx context.Context, slice *resourcev1.ResourceSlice, opts metav1.UpdateOptions) (*resourcev1.ResourceSlice, error) {
	start := time.Now()
	out, err := s.ResourceSliceInterface.Update(ctx, slice, opts)
	s.done("update", start, err)
	return out, err
}

func (s meteredSlices) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	start := time.Now()
	err := s.ResourceSliceInterface.Delete(ctx, name, opts)
	s.done("delete", start, err)
	return err
}
