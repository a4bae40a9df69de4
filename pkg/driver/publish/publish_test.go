package publish_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/internal/testing/examplegen"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// TestBuildFlattensTheMixinForm: what the kit publishes for the mixin form
// of the A100 example node is, device for device, the flat example.
func TestBuildFlattensTheMixinForm(t *testing.T) {
	n := examplegen.A100Node
	p, err := publish.Build(n.Driver, n.Node, n.Slices(mig.Mixins))
	if err != nil {
		t.Fatal(err)
	}
	flat := n.Slices(mig.Flat)
	if len(p.Slices) != len(flat) {
		t.Fatalf("%d slices, want %d", len(p.Slices), len(flat))
	}
	for i, s := range p.Slices {
		if s.UsesMixins() {
			t.Errorf("slice %d still uses mixins", i)
		}
		want, _ := api.ToUpstream(flat[i])
		got, _ := api.ToUpstream(s)
		if !drivertest.EqualJSON(t, got.Spec.Devices, want.Spec.Devices) || !drivertest.EqualJSON(t, got.Spec.SharedCounters, want.Spec.SharedCounters) {
			t.Errorf("slice %d differs from examples/a100-mig-flat", i)
		}
	}
	rp := p.Resources.Pools[n.Node]
	if len(rp.Slices) != 2 || len(rp.Slices[0].SharedCounters) != 2 || len(rp.Slices[0].Devices) != 0 || len(rp.Slices[1].Devices) != 52 {
		t.Fatalf("published pool: %d slices", len(rp.Slices))
	}
}

// TestBuildSplitsForV1Limits: six H100s in one mixin slice (114 devices,
// fine with mixins) become slices of at most 64 devices once flattened,
// counter sets apart; 8 GPUs × 19 devices all published.
func TestBuildSplitsForV1Limits(t *testing.T) {
	n := mig.Node{Driver: driver, Node: node, Model: &mig.H100, GPUs: 8, DriverVersion: "1.0.0", CUDADriverVersion: "12.0.0", GPUsPerSlice: 6}
	desc := n.Slices(mig.Mixins)
	if len(desc) != 3 || len(desc[1].Spec.Devices) != 114 {
		t.Fatalf("description: %d slices", len(desc))
	}
	p, err := publish.Build(driver, node, desc)
	if err != nil {
		t.Fatal(err)
	}
	devices := 0
	for _, s := range p.Resources.Pools[node].Slices {
		if len(s.Devices) > validation.MaxDevicesWithAdvancedFeatures || len(s.Devices) > 0 && len(s.SharedCounters) > 0 {
			t.Errorf("slice with %d devices and %d counter sets", len(s.Devices), len(s.SharedCounters))
		}
		devices += len(s.Devices)
	}
	if devices != 8*19 {
		t.Errorf("%d devices published, want %d", devices, 8*19)
	}
}

// TestBuildRefusesInvalidPools: every problem is reported with the slice
// and a field path, and nothing is published.
func TestBuildRefusesInvalidPools(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func([]*api.ResourceSlice) []*api.ResourceSlice
		want   []string
	}{
		{"unknown counter set", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[1].Spec.Devices[0].ConsumesCounters[0].CounterSet = "gpu-9-counter-set"
			return ss
		}, []string{"spec.devices[0].consumesCounters[0].counterSet", "gpu-9-counter-set"}},
		{"unknown mixin", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[1].Spec.Devices[3].Includes = append(ss[1].Spec.Devices[3].Includes, "no-such-mixin")
			return ss
		}, []string{"spec.devices[3].includes", "no-such-mixin"}},
		{"duplicate device", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[1].Spec.Devices[1].Name = ss[1].Spec.Devices[0].Name
			return ss
		}, []string{"spec.devices[1].name", "Duplicate value"}},
		{"other driver", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[0].Spec.Driver = "other.example.com"
			return ss
		}, []string{"slice 0", "spec.driver", "this kit publishes for driver " + driver}},
		{"central pool", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[0].Spec.NodeName, ss[0].Spec.AllNodes = nil, new(true)
			return ss
		}, []string{"slice 0", "spec: Forbidden", "nodeSelector and allNodes are for pools published from the control plane"}},
		{"per-device node selection", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			for _, s := range ss {
				s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, new(true)
			}
			for i := range ss[1].Spec.Devices {
				ss[1].Spec.Devices[i].NodeName = new(node)
			}
			return ss
		}, []string{"slice 0", "spec.perDeviceNodeSelection: Forbidden", "published from the control plane (publish.StartController)"}},
		{"another node's devices", func(ss []*api.ResourceSlice) []*api.ResourceSlice {
			ss[1].Spec.NodeName = new("node-2")
			return ss
		}, []string{"slice 1", `spec.nodeName: Invalid value: "node-2": a kubelet plugin publishes its own node's devices, expected node-1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mig.Node{Driver: driver, Node: node, Model: &mig.A100, GPUs: 2, DriverVersion: "1.0.0", CUDADriverVersion: "12.0.0"}
			_, err := publish.Build(driver, node, tc.break_(n.Slices(mig.Mixins)))
			var invalid *publish.InvalidPoolError
			if !errors.As(err, &invalid) {
				t.Fatalf("error %v, want InvalidPoolError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// TestServerAcceptsMixins reads the schema an API server publishes at
// /openapi/v3: a server with KEP-5234 has spec.mixins in
// io.k8s.api.resource.v1.ResourceSliceSpec, today's servers do not, and a
// server without resource.k8s.io/v1 cannot take slices at all.
func TestServerAcceptsMixins(t *testing.T) {
	schema := func(props string) string {
		return `{"openapi":"3.0.0","info":{"title":"Kubernetes","version":"v1.37.2"},"paths":{},"components":{"schemas":{
			"io.k8s.api.resource.v1.ResourceSliceSpec":{"type":"object","properties":{` + props + `}}}}}`
	}
	for _, tc := range []struct {
		name   string
		groups map[string]string
		want   bool
		err    string
	}{
		{"v1.37 server", map[string]string{"apis/resource.k8s.io/v1": schema(`"driver":{"type":"string"},"devices":{"type":"array"}`)}, false, ""},
		{"server with mixins", map[string]string{"apis/resource.k8s.io/v1": schema(`"driver":{"type":"string"},"mixins":{"type":"object"}`)}, true, ""},
		{"no resource.k8s.io/v1", map[string]string{"api/v1": `{}`}, false, ""},
		{"schema without ResourceSliceSpec", map[string]string{"apis/resource.k8s.io/v1": `{"components":{"schemas":{}}}`}, false, "has no io.k8s.api.resource.v1.ResourceSliceSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := openAPIServer(tc.groups)
			defer srv.Close()
			d := discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
			got, err := publish.ServerAcceptsMixins(d)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ServerAcceptsMixins = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// openAPIServer serves the OpenAPI v3 discovery document and one schema
// document per group version, the two endpoints kube-apiserver serves.
func openAPIServer(groups map[string]string) *httptest.Server {
	mux := http.NewServeMux()
	var index strings.Builder
	index.WriteString(`{"paths":{`)
	first := true
	for gv, doc := range groups {
		if !first {
			index.WriteString(",")
		}
		first = false
		index.WriteString(`"` + gv + `":{"serverRelativeURL":"/openapi/v3/` + gv + `?hash=1"}`)
		mux.HandleFunc("/openapi/v3/"+gv, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(doc))
		})
	}
	index.WriteString(`}}`)
	mux.HandleFunc("/openapi/v3", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(index.String()))
	})
	return httptest.NewServer(mux)
}
