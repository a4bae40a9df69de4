package monitor

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches /metrics as Prometheus does (gzip accepted) and parses
// it with the client library's parser, which rejects a family that
// appears twice or a malformed line.
func scrape(t *testing.T, m *Monitor, query ...string) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	url := srv.URL + "/metrics"
	for i, q := range query {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		url += sep + q
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// value is the gauge of the series with exactly these labels, or -1.
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m.GetGauge().GetValue()
	}
	return -1
}

func TestMetricsServeEveryPoolFromTheLastSync(t *testing.T) {
	m, _, _ := newTestMonitor(t, time.Hour)
	ok := slice("counters", 2, true)
	m.setSlice(ok)
	m.setSlice(slice("devices", 2, false))
	broken := slice("broken", 1, false) // consumes a counter set nobody publishes
	broken.Spec.Pool.Name = `node-"2"`
	m.setSlice(broken)
	m.sync()
	mfs := scrape(t, m)
	pool := func(name string, more ...string) map[string]string {
		l := map[string]string{"driver": "gpu.example.com", "pool": name}
		for i := 0; i < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	for _, c := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{MetricPools, map[string]string{"condition": "ok"}, 1},
		{MetricPools, map[string]string{"condition": "invalid"}, 1},
		{MetricPools, map[string]string{"condition": "incomplete"}, 0},
		{MetricPoolCondition, pool("node-1", "condition", "ok"), 1},
		{MetricPoolCondition, pool(`node-"2"`, "condition", "invalid"), 1},
		{MetricDevices, pool("node-1"), 1},
		{MetricDevicesAllocated, pool("node-1"), 0},
		{MetricCounterCapacity, pool("node-1", "counter_set", "gpu-0", "counter", "memory"), 40 << 30},
		{MetricCounterConsumed, pool("node-1", "counter_set", "gpu-0", "counter", "memory"), 0},
		{MetricValidationErrors, pool(`node-"2"`, "reason", "FieldValueNotFound"), 1},
		{MetricSyncs, map[string]string{}, 1},
	} {
		got := value(mfs, c.metric, c.labels)
		if c.metric == MetricSyncs {
			got = mfs[c.metric].Metric[0].GetCounter().GetValue()
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
	if n := len(mfs[MetricPoolCondition].Metric); n != 2 {
		t.Errorf("%d %s series, want one per pool", n, MetricPoolCondition)
	}

	// A pool that goes away takes its series with it.
	m.deleteSlice(broken)
	m.sync()
	mfs = scrape(t, m)
	if got := value(mfs, MetricPoolCondition, pool(`node-"2"`, "condition", "invalid")); got != -1 {
		t.Errorf("deleted pool still served: %v", got)
	}
	if got := value(mfs, MetricPools, map[string]string{"condition": "invalid"}); got != 0 {
		t.Errorf("invalid pools = %v after the delete, want 0", got)
	}
}

// TestMetricsNameFilter: name[] parameters select families as promhttp's
// handler does, the pool families and the registry's alike; without them
// every family is served, the Go heap kept by the last collection included.
func TestMetricsNameFilter(t *testing.T) {
	m, _, _ := newTestMonitor(t, time.Hour)
	m.setSlice(slice("counters", 2, true))
	m.setSlice(slice("devices", 2, false))
	m.sync()
	all := scrape(t, m)
	for _, name := range []string{MetricPools, MetricDevices, MetricCounterCapacity, MetricSyncs, "go_gc_heap_live_bytes", "process_resident_memory_bytes"} {
		if all[name] == nil {
			t.Errorf("unfiltered scrape lacks %s", name)
		}
	}
	for _, c := range []struct {
		query []string
		want  []string
	}{
		{[]string{"name[]=" + MetricDevices}, []string{MetricDevices}},
		{[]string{"name[]=" + MetricSyncs, "name[]=" + MetricPools}, []string{MetricSyncs, MetricPools}},
		{[]string{"name[]=no_such_metric"}, nil},
	} {
		got := scrape(t, m, c.query...)
		if len(got) != len(c.want) {
			t.Errorf("%v: %d families, want %v", c.query, len(got), c.want)
		}
		for _, name := range c.want {
			if got[name] == nil || len(got[name].Metric) != len(all[name].Metric) {
				t.Errorf("%v: family %s not served whole", c.query, name)
			}
		}
	}
}
