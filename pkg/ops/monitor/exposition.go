package monitor

import (
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"

	"github.com/dractl/dractl/pkg/core/state"
)

// A cluster of a thousand MIG nodes has some two hundred thousand counter
// series. Building them as client_golang metrics on every scrape (a
// metric, a protobuf message and a label sort per series) takes seconds, so
// each pool's series are rendered in the text exposition format once, when
// a sync recomputes the pool, and a scrape only copies bytes (the way
// kube-state-metrics serves its object metrics).

// family is one metric family of the pool series.
type family int

const (
	famCondition family = iota
	famDevices
	famAllocated
	famTainted
	famCapacity
	famConsumed
	famValidation
	numFamilies
)

var families = [numFamilies]struct{ name, help string }{
	famCondition:  {MetricPoolCondition, "1 for the pool's current condition."},
	famDevices:    {MetricDevices, "Devices the pool's current generation publishes."},
	famAllocated:  {MetricDevicesAllocated, "Devices of the pool held by allocated ResourceClaims (admin access not counted)."},
	famTainted:    {MetricDevicesTainted, "Devices of the pool with a NoSchedule or NoExecute taint: the scheduler gives them only to claims tolerating it."},
	famCapacity:   {MetricCounterCapacity, "Capacity of a shared counter."},
	famConsumed:   {MetricCounterConsumed, "Amount of a shared counter consumed by allocated devices."},
	famValidation: {MetricValidationErrors, "Problems of an invalid pool by reason (the field error type, e.g. FieldValueDuplicate)."},
}

const poolsHelp = "Resource pools by condition: ok, incomplete (skipped by the scheduler) or invalid (unusable)."

// poolSeries are one pool's series, family by family, as exposition text
// lines.
type poolSeries [numFamilies][]byte

// renderPool renders a pool's series. Label names are in sorted order, as
// client_golang writes them, so the lines read the same as before.
func renderPool(s *poolStatus) *poolSeries {
	var out poolSeries
	u := s.usage
	line := func(f family, v float64, labels ...string) {
		b := append(out[f], families[f].name...)
		b = append(b, '{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = appendLabelValue(b, labels[i+1])
			b = append(b, '"')
		}
		b = append(b, "} "...)
		b = appendFloat(b, v)
		out[f] = append(b, '\n')
	}
	line(famCondition, 1, "condition", string(s.condition), "driver", u.Driver, "pool", u.ID.Pool)
	line(famDevices, float64(len(u.Devices)), "driver", u.Driver, "pool", u.ID.Pool)
	line(famAllocated, float64(u.Allocated()), "driver", u.Driver, "pool", u.ID.Pool)
	line(famTainted, float64(len(s.tainted)), "driver", u.Driver, "pool", u.ID.Pool)
	for _, cs := range u.CounterSets {
		for _, c := range cs.Counters {
			line(famCapacity, c.Capacity.AsApproximateFloat64(), "counter", c.Name, "counter_set", cs.Name, "driver", u.Driver, "pool", u.ID.Pool)
			line(famConsumed, c.Consumed.AsApproximateFloat64(), "counter", c.Name, "counter_set", cs.Name, "driver", u.Driver, "pool", u.ID.Pool)
		}
	}
	if s.condition == state.PoolInvalid && u.Invalid != nil {
		var reasons []string
		count := map[string]int{}
		for _, p := range u.Invalid.Problems {
			r := string(p.Err.Type)
			if count[r] == 0 {
				reasons = append(reasons, r)
			}
			count[r]++
		}
		for _, r := range reasons {
			line(famValidation, float64(count[r]), "driver", u.Driver, "pool", u.ID.Pool, "reason", r)
		}
	}
	return &out
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func appendLabelValue(b []byte, v string) []byte {
	if !strings.ContainsAny(v, "\\\n\"") {
		return append(b, v...)
	}
	return append(b, labelEscaper.Replace(v)...)
}

// appendFloat formats a sample value as the text format does.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 1:
		return append(b, '1')
	case f == 0:
		return append(b, '0')
	case f == -1:
		return append(b, "-1"...)
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

func appendHeader(b []byte, name, help string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	return append(b, " gauge\n"...)
}

// ServeHTTP serves /metrics in the text format: the registry's metrics
// (the monitor's own, Go and process), then the pool families from the
// last sync. Like promhttp's handler it serves only the families named by
// name[] query parameters when there are any: a whole page of a thousand
// MIG nodes is tens of megabytes, and a reader watching one family should
// not pay for it.
func (x *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var only map[string]bool
	if names := r.URL.Query()["name[]"]; len(names) > 0 {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	wanted := func(name string) bool { return only == nil || only[name] }
	mfs, err := x.registry.Gather()
	if err != nil {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	x.m.mu.RLock()
	statuses := x.m.current
	x.m.mu.RUnlock()

	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		// The text is highly repetitive; the fastest level already
		// shrinks it about tenfold.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	enc := expfmt.NewEncoder(out, format)
	for _, mf := range mfs {
		if !wanted(mf.GetName()) {
			continue
		}
		if err := enc.Encode(mf); err != nil {
			return // the client went away
		}
	}
	byCondition := map[state.Condition]int{}
	for i := range statuses {
		byCondition[statuses[i].condition]++
	}
	var b []byte
	if wanted(MetricPools) {
		b = appendHeader(b, MetricPools, poolsHelp)
		for _, c := range []state.Condition{state.PoolIncomplete, state.PoolInvalid, state.PoolOK} {
			b = append(b, MetricPools+`{condition="`...)
			b = append(b, c...)
			b = append(b, `"} `...)
			b = strconv.AppendInt(b, int64(byCondition[c]), 10)
			b = append(b, '\n')
		}
	}
	for f := range numFamilies {
		if !wanted(families[f].name) {
			continue
		}
		b = appendHeader(b, families[f].name, families[f].help)
		for i := range statuses {
			b = append(b, statuses[i].series[f]...)
			if len(b) >= 1<<16 {
				if _, err := out.Write(b); err != nil {
					return
				}
				b = b[:0]
			}
		}
	}
	_, _ = out.Write(b)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); enc == "gzip" {
			return true
		}
	}
	return false
}
