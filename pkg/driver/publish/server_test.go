package publish_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/internal/testing/fakeapi"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// ref is an OpenAPI v3 property that is an object of a named schema, as
// kube-apiserver writes one.
func ref(name string) string {
	return `{"allOf":[{"$ref":"#/components/schemas/` + name + `"}]}`
}

// sliceSchema is a schema of resource.k8s.io/v1 ResourceSlice with what
// the tests' slices use; withPartitionType adds spec.partitionTypeAttribute
// (1.37 and newer), and the device attributes know strings and ints only.
func sliceSchema(withPartitionType bool) string {
	spec := `"driver":{"type":"string"},"nodeName":{"type":"string"},"pool":` + ref("io.k8s.api.resource.v1.ResourcePool") +
		`,"perDeviceNodeSelection":{"type":"boolean"},"nodeSelector":{"type":"object"},"allNodes":{"type":"boolean"},` +
		`"sharedCounters":{"type":"array","items":{"type":"object"}},` +
		`"devices":{"type":"array","items":` + ref("io.k8s.api.resource.v1.Device") + `}`
	if withPartitionType {
		spec += `,"partitionTypeAttribute":{"type":"string"}`
	}
	return `{"openapi":"3.0.0","components":{"schemas":{
		"io.k8s.api.resource.v1.ResourceSlice":{"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},
			"metadata":` + ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta") + `,"spec":` + ref("io.k8s.api.resource.v1.ResourceSliceSpec") + `}},
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object","properties":{"name":{"type":"string"},"creationTimestamp":{"type":"string"}}},
		"io.k8s.api.resource.v1.ResourceSliceSpec":{"type":"object","properties":{` + spec + `}},
		"io.k8s.api.resource.v1.ResourcePool":{"type":"object","properties":{"name":{},"generation":{},"resourceSliceCount":{}}},
		"io.k8s.api.resource.v1.Device":{"type":"object","properties":{"name":{"type":"string"},"nodeName":{},"allNodes":{},"nodeSelector":{},"consumesCounters":{"type":"array"},
			"attributes":{"type":"object","additionalProperties":` + ref("io.k8s.api.resource.v1.DeviceAttribute") + `}}},
		"io.k8s.api.resource.v1.DeviceAttribute":{"type":"object","properties":{"string":{"type":"string"},"int":{"type":"integer"}}}
	}}}`
}

// discover is a discovery client of a server answering as f does.
func discover(t *testing.T, f fakeapi.Server) discovery.DiscoveryInterface {
	t.Helper()
	srv := f.Serve()
	t.Cleanup(srv.Close)
	return fakeapi.Discovery(srv)
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

var fakeClientServer = drivertest.FakeServer

var served = fakeapi.Served

// TestReadServer: the kit judges by the rules of the server's minor where
// dractl has them, by the nearest minor's elsewhere, and refuses a server
// that does not serve resource.k8s.io/v1, naming the API.
func TestReadServer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		server       fakeapi.Server
		minor, rules int
		err          string
	}{
		{name: "1.37", server: fakeapi.Server{Version: fakeapi.Release("v1.37.2", 37), Resources: served, Schema: sliceSchema(true)}, minor: 37, rules: 37},
		{name: "1.38 pre-release", server: fakeapi.Server{Version: fakeapi.Release("v1.38.0-beta.0", 38), Resources: served, Schema: sliceSchema(true)}, minor: 38, rules: 38},
		{name: "1.36: the nearest rules, 1.37's", server: fakeapi.Server{Version: fakeapi.Release("v1.36.3", 36), Resources: served, Schema: sliceSchema(false)}, minor: 36, rules: 37},
		{name: "1.39: the newest rules", server: fakeapi.Server{Version: fakeapi.Release("v1.39.0", 39), Resources: served, Schema: sliceSchema(true)}, minor: 39, rules: 38},
		{name: "1.38 emulating 1.37", server: fakeapi.Server{Version: version.Info{GitVersion: "v1.38.0-beta.0", EmulationMajor: "1", EmulationMinor: "37"}, Resources: served, Schema: sliceSchema(true)}, minor: 37, rules: 37},
		{name: "no version stamp", server: fakeapi.Server{Version: version.Info{GitVersion: "v0.0.0-master+$Format:%H$", EmulationMajor: "1", EmulationMinor: "37"}, Resources: served, Schema: sliceSchema(true)}, minor: 37, rules: 37},
		{name: "1.33: no resource.k8s.io/v1", server: fakeapi.Server{Version: version.Info{GitVersion: "v1.33.5", EmulationMajor: "1", EmulationMinor: "33"}},
			err: "kube-apiserver v1.33.5 does not serve resourceslices in resource.k8s.io/v1 (Kubernetes 1.34 and newer do): a DRA driver publishes its devices there"},
		{name: "1.34 with resource.k8s.io/v1 off", server: fakeapi.Server{Version: fakeapi.Release("v1.34.4", 34)},
			err: "kube-apiserver v1.34.4 does not serve resourceslices in resource.k8s.io/v1"},
		{name: "resource.k8s.io/v1 without slices", server: fakeapi.Server{Version: fakeapi.Release("v1.34.4", 34), Resources: []string{"deviceclasses"}, Schema: sliceSchema(false)},
			err: "kube-apiserver v1.34.4 does not serve resourceslices in resource.k8s.io/v1"},
		{name: "schema without ResourceSlice", server: fakeapi.Server{Version: fakeapi.Release("v1.37.2", 37), Resources: served, Schema: `{"components":{"schemas":{}}}`},
			err: "kube-apiserver v1.37.2: the OpenAPI v3 schema of resource.k8s.io/v1 has no io.k8s.api.resource.v1.ResourceSlice"},
		{name: "not Kubernetes 1.x", server: fakeapi.Server{Version: version.Info{GitVersion: "v2.0.0"}, Resources: served, Schema: sliceSchema(true)},
			err: `expected a Kubernetes version such as 1.38, found "v2.0.0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := publish.ReadServer(discover(t, tc.server))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadServer: %v, %v; want error %q", s, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != tc.server.Version.GitVersion || s.Minor != (validation.KubeVersion{Minor: tc.minor}) || s.Rules != (validation.KubeVersion{Minor: tc.rules}) {
				t.Errorf("ReadServer = %s, minor %s, rules %s; want minor 1.%d, rules 1.%d", s.Version, s.Minor, s.Rules, tc.minor, tc.rules)
			}
		})
	}
}

// TestBuildForServer: the same description is published or refused as
// the server of each minor takes it: a name with two slashes is 1.37's
// and refused for 1.38, a field the server's schema lacks is refused with
// its path, what every server knows is published.
func TestBuildForServer(t *testing.T) {
	read := func(git string, minor int, withPartitionType bool) *publish.Server {
		s, err := publish.ReadServer(discover(t, fakeapi.Server{Version: fakeapi.Release(git, minor), Resources: served, Schema: sliceSchema(withPartitionType)}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s134, s136, s137, s138 := read("v1.34.4", 34, false), read("v1.36.3", 36, false), read("v1.37.2", 37, true), read("v1.38.0-beta.0", 38, true)
	slice := func(change func(*api.ResourceSlice)) []*api.ResourceSlice {
		s := &api.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nics"}, Spec: api.ResourceSliceSpec{
			Devices: []api.Device{{Name: "nic-0", Attributes: map[api.QualifiedName]api.DeviceAttribute{"model": {StringValue: ptr.To("x710")}}}}}}
		change(s)
		return []*api.ResourceSlice{s}
	}
	twoSlashes := slice(func(s *api.ResourceSlice) {
		s.Spec.Devices[0].Attributes["example.net/pci/root"] = api.DeviceAttribute{StringValue: ptr.To("pci0000:00")}
	})
	boolAttribute := slice(func(s *api.ResourceSlice) {
		s.Spec.Devices[0].Attributes["sriov"] = api.DeviceAttribute{BoolValue: ptr.To(true)}
	})
	plain := slice(func(*api.ResourceSlice) {})
	for _, tc := range []struct {
		name   string
		server *publish.Server
		desc   []*api.ResourceSlice
		want   string // "" when published
	}{
		{"plain, 1.34", s134, plain, ""},
		{"plain, 1.36", s136, plain, ""},
		{"plain, 1.38", s138, plain, ""},
		{"two slashes, 1.37", s137, twoSlashes, ""},
		{"two slashes, 1.38", s138, twoSlashes, `spec.devices[0].attributes[example.net/pci/root]: Invalid value: "example.net/pci/root": must not contain more than one slash`},
		{"two slashes, no server (the newest rules)", nil, twoSlashes, "must not contain more than one slash"},
		{"two slashes, 1.36 (1.37's rules)", s136, twoSlashes, ""},
		{"a field the schema lacks", s137, boolAttribute, "pool node-1 slice nics (flattened): spec.devices[0].attributes[sriov].bool: Forbidden: kube-apiserver v1.37.2 does not know this field of resource.k8s.io/v1 and would drop it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := publish.BuildFor(tc.server, driver, node, tc.desc)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if n := len(p.Resources.Pools[node].Slices); n != 1 {
					t.Fatalf("%d slices published, want 1", n)
				}
				return
			}
			var invalid *publish.InvalidPoolError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an InvalidPoolError with %q", err, tc.want)
			}
		})
	}

	// A pool the control plane publishes: partitionTypeAttribute is a
	// field 1.36 does not know; a per-device node selector of two terms is
	// 1.37's and refused for 1.38.
	central := func(change func(*api.ResourceSlice)) []*api.ResourceSlice {
		s := &api.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nics"}, Spec: api.ResourceSliceSpec{
			Pool: api.ResourcePool{Name: "rack-1"}, PerDeviceNodeSelection: ptr.To(true),
			Devices: []api.Device{{Name: "nic-0", NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			}}}}}}
		change(s)
		return []*api.ResourceSlice{s}
	}
	twoTerms := central(func(s *api.ResourceSlice) {
		sel := s.Spec.Devices[0].NodeSelector
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, sel.NodeSelectorTerms[0])
	})
	partitionType := append(central(func(s *api.ResourceSlice) {
		s.Name, s.Spec.Devices = "counters", nil
		s.Spec.SharedCounters = []api.CounterSet{{Name: "nic-0", Counters: map[string]api.Counter{"vfs": {Value: qty("8")}}}}
	}), central(func(s *api.ResourceSlice) {
		s.Spec.PartitionTypeAttribute = ptr.To[api.FullyQualifiedName](driver + "/kind")
		d := &s.Spec.Devices[0]
		d.Attributes = map[api.QualifiedName]api.DeviceAttribute{"kind": {StringValue: ptr.To("vf")}}
		d.ConsumesCounters = []api.DeviceCounterConsumption{{CounterSet: "nic-0", Counters: map[string]api.Counter{"vfs": {Value: qty("1")}}}}
	})...)
	for _, tc := range []struct {
		name   string
		server *publish.Server
		desc   []*api.ResourceSlice
		want   string
	}{
		{"two terms, 1.37", s137, twoTerms, ""},
		{"two terms, 1.38", s138, twoTerms, "spec.devices[0].nodeSelector.nodeSelectorTerms: Invalid value: \"2 terms\": must have exactly one node selector term"},
		{"partitionTypeAttribute, 1.37", s137, partitionType, ""},
		{"counter sets apart, 1.34", s134, partitionType, "pool rack-1: kube-apiserver v1.34.4 takes counter sets only in the slice of the devices that consume them (KEP-4815 before 1.35)"},
		{"partitionTypeAttribute, 1.36", s136, partitionType, "spec.partitionTypeAttribute: Forbidden: kube-apiserver v1.36.3 does not know this field of resource.k8s.io/v1 and would drop it"},
	} {
		t.Run("central/"+tc.name, func(t *testing.T) {
			_, err := publish.BuildCentralFor(tc.server, driver, tc.desc)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

const (
	driver = gpu.DriverName
	node   = "node-1"
)
