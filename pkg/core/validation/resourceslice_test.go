package validation

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

const driver = "gpu.example.com"

func q(s string) resource.Quantity   { return resource.MustParse(s) }
func qp(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func strAttr(s string) api.DeviceAttribute { return api.DeviceAttribute{StringValue: ptr.To(s)} }
func intAttr(i int64) api.DeviceAttribute  { return api.DeviceAttribute{IntValue: ptr.To(i)} }

// manyAttrs returns n attributes named prefix0..prefixN-1.
func manyAttrs(prefix string, n int) map[api.QualifiedName]api.DeviceAttribute {
	m := make(map[api.QualifiedName]api.DeviceAttribute, n)
	for i := range n {
		m[api.QualifiedName(fmt.Sprintf("%s%d", prefix, i))] = intAttr(int64(i))
	}
	return m
}

func manyCounters(prefix string, n int) map[string]api.Counter {
	m := make(map[string]api.Counter, n)
	for i := range n {
		m[fmt.Sprintf("%s%d", prefix, i)] = api.Counter{Value: q("1")}
	}
	return m
}

func simpleDevice(name string) api.Device {
	return api.Device{
		Name:       name,
		Attributes: map[api.QualifiedName]api.DeviceAttribute{"model": strAttr("a100")},
		Capacity:   map[api.QualifiedName]api.DeviceCapacity{"memory": {Value: q("40Gi")}},
	}
}

func simpleDevices(n int) []api.Device {
	out := make([]api.Device, n)
	for i := range out {
		out[i] = simpleDevice(fmt.Sprintf("dev-%d", i))
	}
	return out
}

// plainSlice is a valid slice without mixins that exercises most fields.
func plainSlice() *api.ResourceSlice {
	dev := func(name string, index int64) api.Device {
		return api.Device{
			Name: name,
			Attributes: map[api.QualifiedName]api.DeviceAttribute{
				"model":                   strAttr("a100"),
				"index":                   intAttr(index),
				"driverVersion":           {VersionValue: ptr.To("1.2.3-rc.1+build.5")},
				"gpu.example.com/profile": strAttr("full"),
				"numa":                    {IntValues: []int64{0, 1}},
			},
			Capacity: map[api.QualifiedName]api.DeviceCapacity{
				"memory": {Value: q("80Gi")},
			},
			ConsumesCounters: []api.DeviceCounterConsumption{{
				CounterSet:          "gpu-counters",
				Counters:            map[string]api.Counter{"memory": {Value: q("80Gi")}, "sm": {Value: q("108")}},
				CompatibilityGroups: []string{"full"},
			}},
			Taints:                   []api.DeviceTaint{{Key: "example.com/maintenance", Value: "soon", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
			BindsToNode:              ptr.To(true),
			BindingConditions:        []string{"example.com/attached"},
			BindingFailureConditions: []string{"example.com/failed"},
		}
	}
	return &api.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.example.com"},
		Spec: api.ResourceSliceSpec{
			Driver:                 driver,
			Pool:                   api.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 2},
			NodeName:               ptr.To("node-1"),
			Devices:                []api.Device{dev("gpu-0", 0), dev("gpu-1", 1)},
			PartitionTypeAttribute: ptr.To(api.FullyQualifiedName("gpu.example.com/profile")),
			SkipNodeOperations:     []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationNodePrepareResources, resourcev1.SkipNodeOperationNodeUnprepareResources},
		},
	}
}

// countersSlice is a valid slice that only defines counter sets.
func countersSlice() *api.ResourceSlice {
	s := plainSlice()
	s.Name = "node-1-counters"
	s.Spec.Devices = nil
	s.Spec.PartitionTypeAttribute = nil
	s.Spec.SharedCounters = []api.CounterSet{{
		Name:     "gpu-counters",
		Counters: map[string]api.Counter{"memory": {Value: q("80Gi")}, "sm": {Value: q("108")}},
	}}
	return s
}

func consumableDevice(s *api.ResourceSlice, pol *resourcev1.CapacityRequestPolicy) {
	d := &s.Spec.Devices[0]
	d.AllowMultipleAllocations = ptr.To(true)
	d.Capacity["memory"] = api.DeviceCapacity{Value: q("80Gi"), RequestPolicy: pol}
}

func selector(reqs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}
}

func zoneIn(values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: values}
}

type sliceCase struct {
	name   string
	base   func() *api.ResourceSlice
	mutate func(s *api.ResourceSlice)
	want   []want
	warn   []string // field paths of ResourceSliceWarnings
}

const d0 = "spec.devices[0]"

func TestResourceSlicePlain(t *testing.T) {
	cases := []sliceCase{
		{name: "valid baseline"},
		{name: "valid counter set slice", base: countersSlice},
		// metadata
		{name: "invalid name", mutate: func(s *api.ResourceSlice) { s.Name = "Bad_Name" }, want: []want{eInv("metadata.name")}},
		{name: "generateName only is accepted", mutate: func(s *api.ResourceSlice) { s.Name, s.GenerateName = "", "node-1-" }},
		{name: "invalid generateName", mutate: func(s *api.ResourceSlice) { s.Name, s.GenerateName = "", "Node_" }, want: []want{eInv("metadata.generateName")}},
		{name: "missing name", mutate: func(s *api.ResourceSlice) { s.Name = "" }, want: []want{eReq("metadata.name")}},
		{name: "namespace on cluster-scoped object", mutate: func(s *api.ResourceSlice) { s.Namespace = "default" }, want: []want{eForb("metadata.namespace")}},
		// driver
		{name: "missing driver", mutate: func(s *api.ResourceSlice) { s.Spec.Driver = "" }, want: []want{eReq("spec.driver")}},
		{name: "driver too long", mutate: func(s *api.ResourceSlice) { s.Spec.Driver = strings.Repeat("a", 60) + ".com" }, want: []want{eTooLong("spec.driver")}},
		{name: "driver not a DNS subdomain", mutate: func(s *api.ResourceSlice) { s.Spec.Driver = "gpu_example.com" }, want: []want{eInv("spec.driver")}},
		{name: "upper case driver accepted like kube-apiserver", mutate: func(s *api.ResourceSlice) { s.Spec.Driver = "GPU.example.com" }},
		// pool
		{name: "missing pool name", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.Name = "" }, want: []want{eReq("spec.pool.name")}},
		{name: "pool name with slashes", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.Name = "rack-1/node-1" }},
		{name: "pool name with empty segment", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.Name = "rack-1//node-1" }, want: []want{eInv("spec.pool.name")}},
		{name: "pool name too long", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.Name = strings.Repeat("abcdefghij/", 23) + "x" }, want: []want{eTooLong("spec.pool.name")}},
		{name: "negative generation", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.Generation = -1 }, want: []want{eInv("spec.pool.generation")}},
		{name: "zero resourceSliceCount", mutate: func(s *api.ResourceSlice) { s.Spec.Pool.ResourceSliceCount = 0 }, want: []want{eInv("spec.pool.resourceSliceCount")}},
		// node selection
		{name: "no node selection", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName = nil }, want: []want{eReq("spec")}},
		{name: "two node selections", mutate: func(s *api.ResourceSlice) { s.Spec.AllNodes = ptr.To(true) }, want: []want{eInv("spec")}},
		{name: "empty nodeName", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName = ptr.To("") }, want: []want{eInv("spec.nodeName"), eReq("spec")}},
		{name: "invalid nodeName", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName = ptr.To("Node_1") }, want: []want{eInv("spec.nodeName")}},
		{name: "allNodes false", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(false) }, want: []want{eInv("spec.allNodes"), eReq("spec")}},
		{name: "perDeviceNodeSelection false", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(false) }, want: []want{eInv("spec.perDeviceNodeSelection"), eReq("spec")}},
		{name: "valid node selector", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(zoneIn("a", "b")) }},
		{name: "node selector with two terms", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}
		}, want: []want{eInv("spec.nodeSelector.nodeSelectorTerms")}},
		{name: "node selector without terms", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, &corev1.NodeSelector{} }, want: []want{eReq("spec.nodeSelector.nodeSelectorTerms"), eInv("spec.nodeSelector.nodeSelectorTerms")}},
		{name: "node selector In without values", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(zoneIn()) },
			want: []want{eReq("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{name: "node selector Exists with values", mutate: func(s *api.ResourceSlice) {
			r := zoneIn("a")
			r.Operator = corev1.NodeSelectorOpExists
			s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(r)
		}, want: []want{eForb("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{name: "node selector Gt with two values", mutate: func(s *api.ResourceSlice) {
			r := zoneIn("1", "2")
			r.Operator = corev1.NodeSelectorOpGt
			s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(r)
		}, want: []want{eReq("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values")}},
		{name: "node selector unknown operator", mutate: func(s *api.ResourceSlice) {
			r := zoneIn("a")
			r.Operator = "Near"
			s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(r)
		}, want: []want{eInv("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator")}},
		{name: "node selector invalid key", mutate: func(s *api.ResourceSlice) {
			r := zoneIn("a")
			r.Key = "bad key"
			s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(r)
		}, want: []want{eInv("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].key")}},
		{name: "node selector invalid value", mutate: func(s *api.ResourceSlice) { s.Spec.NodeName, s.Spec.NodeSelector = nil, selector(zoneIn("a", "-bad-")) },
			want: []want{eInv("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[1]")}},
		{name: "node field selector on labels", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.labels", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}}}}
		}, want: []want{eInv("spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].key")}},
		// devices vs. counters
		{name: "devices and sharedCounters", mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters = countersSlice().Spec.SharedCounters }, want: []want{eInv("spec")}},
		{name: "128 simple devices", mutate: func(s *api.ResourceSlice) { s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(128), nil }},
		{name: "129 simple devices", mutate: func(s *api.ResourceSlice) { s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(129), nil }, want: []want{eTooMany("spec.devices")}},
		{name: "65 devices, one tainted", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(65), nil
			s.Spec.Devices[64].Taints = []api.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNone}}
		}, want: []want{eTooMany("spec.devices")}},
		{name: "65 devices, one consuming counters", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(65), nil
			s.Spec.Devices[3].ConsumesCounters = []api.DeviceCounterConsumption{{CounterSet: "c", Counters: manyCounters("c", 1)}}
		}, want: []want{eTooMany("spec.devices")}},
		{name: "65 devices, one list attribute", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(65), nil
			s.Spec.Devices[0].Attributes["ids"] = api.DeviceAttribute{StringValues: []string{"a"}}
		}, want: []want{eTooMany("spec.devices")}},
		// device names
		{name: "invalid device name", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Name = "GPU_0" }, want: []want{eInv(d0 + ".name")}},
		{name: "missing device name", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Name = "" }, want: []want{eReq(d0 + ".name")}},
		{name: "duplicate device name", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[1].Name = "gpu-0" }, want: []want{eDup("spec.devices[1]")}},
		// attributes
		{name: "attribute name with space", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["bad name"] = intAttr(1) }, want: []want{eInv(d0 + ".attributes[bad name]")}},
		{name: "attribute domain invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["bad_domain/x"] = intAttr(1) }, want: []want{eInv(d0 + ".attributes[bad_domain/x]")}},
		{name: "attribute empty domain", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["/x"] = intAttr(1) }, want: []want{eInv(d0 + ".attributes[/x]")}},
		{name: "attribute id too long", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes[api.QualifiedName(strings.Repeat("x", 33))] = intAttr(1)
		},
			want: []want{eTooLong(d0 + ".attributes[" + strings.Repeat("x", 33) + "]")}},
		{name: "attribute with two slashes", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["a.com/b/c"] = intAttr(1) }, want: []want{eInv(d0 + ".attributes[a.com/b/c]")}},
		{name: "attribute without value", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["empty"] = api.DeviceAttribute{} }, want: []want{eInv(d0 + ".attributes[empty]")}},
		{name: "attribute with two values", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["two"] = api.DeviceAttribute{IntValue: ptr.To[int64](1), BoolValue: ptr.To(true)}
		}, want: []want{eInv(d0 + ".attributes[two]")}},
		{name: "string attribute too long", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Attributes["model"] = strAttr(strings.Repeat("x", 65)) },
			want: []want{eTooLong(d0 + ".attributes[model].string")}},
		{name: "version not semver", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["driverVersion"] = api.DeviceAttribute{VersionValue: ptr.To("1.0")}
		},
			want: []want{eInv(d0 + ".attributes[driverVersion].version")}},
		{name: "empty list attribute", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["numa"] = api.DeviceAttribute{IntValues: []int64{}}
		},
			want: []want{eInv(d0 + ".attributes[numa].ints")}},
		{name: "list string item too long", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["ids"] = api.DeviceAttribute{StringValues: []string{"ok", strings.Repeat("x", 65)}}
		}, want: []want{eTooLong(d0 + ".attributes[ids].strings[1]")}},
		{name: "list version item not semver", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["vers"] = api.DeviceAttribute{VersionValues: []string{"v1"}}
		}, want: []want{eInv(d0 + ".attributes[vers].versions[0]")}},
		{name: "33 attributes and capacities", mutate: func(s *api.ResourceSlice) {
			for k, v := range manyAttrs("a", 27) { // plus 5 attributes and 1 capacity
				s.Spec.Devices[0].Attributes[k] = v
			}
		}, want: []want{eInv(d0)}},
		{name: "49 attribute values", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["numa"] = api.DeviceAttribute{IntValues: make([]int64, 45)} // plus 4 scalars
		}, want: []want{eInv(d0)}},
		// capacity and request policies
		{name: "requestPolicy without allowMultipleAllocations", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Capacity["memory"] = api.DeviceCapacity{Value: q("80Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: qp("1Gi")}}
		}, want: []want{eForb(d0 + ".capacity[memory].requestPolicy")}},
		{name: "valid validValues", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("10Gi"), ValidValues: []resource.Quantity{q("10Gi"), q("20Gi"), q("40Gi")}})
		}},
		{name: "validValues and validRange", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("10Gi"), ValidValues: []resource.Quantity{q("10Gi")}, ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi")}})
		}, want: []want{eForb(d0 + ".capacity[memory].requestPolicy")}},
		{name: "validValues without default", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{ValidValues: []resource.Quantity{q("10Gi")}})
		}, want: []want{eReq(d0 + ".capacity[memory].requestPolicy.default")}},
		{name: "validValues unsorted", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("10Gi"), ValidValues: []resource.Quantity{q("20Gi"), q("10Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validValues[1]")}},
		{name: "validValues duplicate", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("10Gi"), ValidValues: []resource.Quantity{q("10Gi"), q("10240Mi")}})
		}, want: []want{eDup(d0 + ".capacity[memory].requestPolicy.validValues[1]")}},
		{name: "validValues equal but written differently", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1"), ValidValues: []resource.Quantity{q("1"), q("1000m")}})
		}, warn: []string{d0 + ".capacity[memory].requestPolicy.validValues[1]"}},
		{name: "11 validValues", mutate: func(s *api.ResourceSlice) {
			vs := make([]resource.Quantity, 11)
			for i := range vs {
				vs[i] = *resource.NewQuantity(int64(i+1), resource.BinarySI)
			}
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1"), ValidValues: vs})
		}, want: []want{eTooMany(d0 + ".capacity[memory].requestPolicy.validValues")}},
		{name: "default not in validValues", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("5Gi"), ValidValues: []resource.Quantity{q("10Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validValues")}},
		{name: "validValue above capacity", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("10Gi"), ValidValues: []resource.Quantity{q("10Gi"), q("100Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validValues[1]")}},
		{name: "valid validRange", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("2Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Max: qp("65Gi"), Step: qp("1Gi")}})
		}},
		{name: "valid fractional step", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1500m"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("0"), Step: qp("500m")}})
		}},
		{name: "validRange without default", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi")}})
		}, want: []want{eReq(d0 + ".capacity[memory].requestPolicy.default")}},
		{name: "validRange without min", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{}})
		}, want: []want{eReq(d0 + ".capacity[memory].requestPolicy.validRange.min")}},
		// kube-apiserver rejects a negative min only on the whole-number
		// step path; elsewhere it is a warning.
		{name: "negative min without step", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("-1")}})
		}, warn: []string{d0 + ".capacity[memory].requestPolicy.validRange.min"}},
		{name: "negative min with whole-number step", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("-1"), Step: qp("2")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.min")}},
		{name: "negative min with fractional step", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("0"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("-1"), Step: qp("500m")}})
		}, warn: []string{d0 + ".capacity[memory].requestPolicy.validRange.min"}},
		{name: "whole-number step with max beyond int64", mutate: func(s *api.ResourceSlice) {
			d := &s.Spec.Devices[0]
			d.AllowMultipleAllocations = ptr.To(true)
			d.Capacity["memory"] = api.DeviceCapacity{Value: q("1e30"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
				Default: qp("1"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1"), Max: qp("1e20"), Step: qp("1")}}}
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.max")}},
		{name: "fractional range below a milli", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1"), Step: qp("1u")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "fractional default with whole-number range", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1500m"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1"), Step: qp("1")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "fractional range without step below a milli", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1n")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.min")}},
		{name: "min above capacity", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("100Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("90Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.min")}},
		{name: "default below min", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("2Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.default")}},
		{name: "max below min", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("2Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("2Gi"), Max: qp("4Gi")}})
			s.Spec.Devices[0].Capacity["memory"].RequestPolicy.ValidRange.Min = qp("8Gi")
			s.Spec.Devices[0].Capacity["memory"].RequestPolicy.Default = qp("8Gi")
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.max"), eInv(d0 + ".capacity[memory].requestPolicy.validRange.default")}},
		{name: "max above capacity", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Max: qp("90Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.max")}},
		{name: "default above max", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("5Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Max: qp("4Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.default")}},
		{name: "zero step", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Step: qp("0")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "min plus step above capacity", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("60Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("60Gi"), Step: qp("30Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "default off the step grid", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("3Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Step: qp("4Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "max off the step grid", mutate: func(s *api.ResourceSlice) {
			consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("1Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Max: qp("8Gi"), Step: qp("2Gi")}})
		}, want: []want{eInv(d0 + ".capacity[memory].requestPolicy.validRange.step")}},
		{name: "capacity name invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Capacity["mem ory"] = api.DeviceCapacity{Value: q("1")} },
			want: []want{eInv(d0 + ".capacity[mem ory]")}},
		// taints
		{name: "17 taints", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Taints = make([]api.DeviceTaint, 17)
		}, want: []want{eTooMany(d0 + ".taints")}},
		{name: "16 taints", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Taints = make([]api.DeviceTaint, 16)
			for i := range s.Spec.Devices[0].Taints {
				s.Spec.Devices[0].Taints[i] = api.DeviceTaint{Key: fmt.Sprintf("k%d", i), Effect: resourcev1.DeviceTaintEffectNoExecute}
			}
		}},
		{name: "taint key invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Taints[0].Key = "bad key" }, want: []want{eInv(d0 + ".taints[0].key")}},
		{name: "taint value invalid", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Taints[0].Value = "bad value" }, want: []want{eInv(d0 + ".taints[0].value")}},
		{name: "taint effect missing", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Taints[0].Effect = "" }, want: []want{eReq(d0 + ".taints[0].effect")}},
		{name: "taint effect PreferNoSchedule", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].Taints[0].Effect = "PreferNoSchedule" },
			want: []want{eNotSupp(d0 + ".taints[0].effect")}},
		// binding conditions
		{name: "5 binding conditions", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].BindingConditions = []string{"a", "b", "c", "d", "e"} },
			want: []want{eTooMany(d0 + ".bindingConditions")}},
		{name: "5 binding failure conditions", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].BindingFailureConditions = []string{"a", "b", "c", "d", "e"}
		},
			want: []want{eTooMany(d0 + ".bindingFailureConditions")}},
		{name: "binding condition not a condition type", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].BindingConditions = []string{"not valid"} },
			want: []want{eInv(d0 + ".bindingConditions[0]")}},
		{name: "duplicate binding condition", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].BindingConditions = []string{"a", "a"} },
			want: []want{eDup(d0 + ".bindingConditions[1]")}},
		{name: "binding conditions overlap", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].BindingFailureConditions = []string{"example.com/attached"}
		},
			want: []want{eInv(d0 + ".bindingFailureConditions[0]")}},
		{name: "binding conditions without failure conditions", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].BindingFailureConditions = nil },
			want: []want{eInv(d0 + ".bindingFailureConditions")}},
		{name: "failure conditions without binding conditions", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].BindingConditions = nil },
			want: []want{eInv(d0 + ".bindingConditions")}},
		// consumesCounters
		{name: "3 consumptions", mutate: func(s *api.ResourceSlice) {
			d := &s.Spec.Devices[0]
			d.ConsumesCounters = append(d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: "b", Counters: manyCounters("c", 1)}, api.DeviceCounterConsumption{CounterSet: "c", Counters: manyCounters("c", 1)})
		}, want: []want{eTooMany(d0 + ".consumesCounters")}},
		{name: "duplicate counterSet", mutate: func(s *api.ResourceSlice) {
			d := &s.Spec.Devices[0]
			d.ConsumesCounters = append(d.ConsumesCounters, api.DeviceCounterConsumption{CounterSet: "gpu-counters", Counters: manyCounters("c", 1)})
		}, want: []want{eDup(d0 + ".consumesCounters[1]")}},
		{name: "missing counterSet", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].CounterSet = "" },
			want: []want{eReq(d0 + ".consumesCounters[0].counterSet")}},
		{name: "counterSet not a DNS label", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].CounterSet = "gpu.counters" },
			want: []want{eInv(d0 + ".consumesCounters[0].counterSet")}},
		{name: "consumption without counters", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].Counters = nil },
			want: []want{eReq(d0 + ".consumesCounters[0].counters")}},
		{name: "consumed counter name invalid", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].Counters["Memory"] = api.Counter{Value: q("1")}
		},
			want: []want{eInv(d0 + ".consumesCounters[0].counters[Memory]")}},
		{name: "33 consumed counters", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].ConsumesCounters[0].Counters = manyCounters("c", 33) },
			want: []want{eTooMany(d0 + ".consumesCounters[0].counters")}},
		{name: "3 compatibility groups", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"a", "b", "c"}
		},
			want: []want{eTooMany(d0 + ".consumesCounters[0].compatibilityGroups")}},
		{name: "duplicate compatibility group", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"a", "a"}
		},
			want: []want{eDup(d0 + ".consumesCounters[0].compatibilityGroups[1]")}},
		{name: "compatibility group not a DNS label", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].ConsumesCounters[0].CompatibilityGroups = []string{"Full"}
		},
			want: []want{eInv(d0 + ".consumesCounters[0].compatibilityGroups[0]")}},
		{name: "2049 consumed counters in slice", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices, s.Spec.PartitionTypeAttribute = simpleDevices(64), nil
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].ConsumesCounters = []api.DeviceCounterConsumption{
					{CounterSet: "a", Counters: manyCounters("c", 16)}, {CounterSet: "b", Counters: manyCounters("c", 16)}}
			}
			s.Spec.Devices[0].ConsumesCounters[0].Counters["extra"] = api.Counter{Value: q("1")}
		}, warn: []string{"spec.devices"}},
		// per-device node selection
		{name: "device nodeName without perDeviceNodeSelection", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[0].NodeName = ptr.To("node-1") },
			want: []want{eInv(d0)}},
		{name: "device allNodes without perDeviceNodeSelection", mutate: func(s *api.ResourceSlice) { s.Spec.Devices[1].AllNodes = ptr.To(true) },
			want: []want{eInv("spec.devices[1]")}},
		{name: "perDeviceNodeSelection with selection on each device", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].NodeName = ptr.To("node-1")
			s.Spec.Devices[1].NodeSelector = selector(zoneIn("a"))
		}},
		{name: "perDeviceNodeSelection, device without selection", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].AllNodes = ptr.To(true)
		}, want: []want{eReq("spec.devices[1]")}},
		{name: "perDeviceNodeSelection, device with two selections", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].AllNodes = ptr.To(true)
			s.Spec.Devices[0].NodeName = ptr.To("node-1")
			s.Spec.Devices[1].AllNodes = ptr.To(true)
		}, want: []want{eInv(d0)}},
		// kube-apiserver 1.37 accepts it with a warning (TestVersionRules).
		{name: "perDeviceNodeSelection, device selector with two terms", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}
			s.Spec.Devices[1].AllNodes = ptr.To(true)
		}, want: []want{eInv(d0 + ".nodeSelector.nodeSelectorTerms")}},
		{name: "perDeviceNodeSelection, device nodeName invalid", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].NodeName = ptr.To("Node_1")
			s.Spec.Devices[1].AllNodes = ptr.To(true)
		}, want: []want{eInv(d0 + ".nodeName")}},
		{name: "perDeviceNodeSelection, device allNodes false", mutate: func(s *api.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
			s.Spec.Devices[0].AllNodes = ptr.To(false)
			s.Spec.Devices[1].AllNodes = ptr.To(true)
		}, want: []want{eInv(d0 + ".allNodes"), eReq(d0)}},
		// shared counters
		{name: "9 counter sets", base: countersSlice, mutate: func(s *api.ResourceSlice) {
			for i := range 8 {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, api.CounterSet{Name: fmt.Sprintf("set-%d", i), Counters: manyCounters("c", 1)})
			}
		}, want: []want{eTooMany("spec.sharedCounters")}},
		{name: "duplicate counter set", base: countersSlice, mutate: func(s *api.ResourceSlice) {
			s.Spec.SharedCounters = append(s.Spec.SharedCounters, s.Spec.SharedCounters[0])
		}, want: []want{eDup("spec.sharedCounters[1]")}},
		{name: "counter set name invalid", base: countersSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Name = "Gpu" },
			want: []want{eInv("spec.sharedCounters[0].name")}},
		{name: "counter set name missing", base: countersSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Name = "" },
			want: []want{eReq("spec.sharedCounters[0].name")}},
		{name: "counter set without counters", base: countersSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Counters = nil },
			want: []want{eReq("spec.sharedCounters[0].counters")}},
		{name: "33 counters in a set", base: countersSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Counters = manyCounters("c", 33) },
			want: []want{eTooMany("spec.sharedCounters[0].counters")}},
		{name: "counter name invalid", base: countersSlice, mutate: func(s *api.ResourceSlice) { s.Spec.SharedCounters[0].Counters["bad_name"] = api.Counter{} },
			want: []want{eInv("spec.sharedCounters[0].counters[bad_name]")}},
		// partitionTypeAttribute
		{name: "partitionTypeAttribute without consuming devices", mutate: func(s *api.ResourceSlice) {
			for i := range s.Spec.Devices {
				s.Spec.Devices[i].ConsumesCounters = nil
			}
		}, want: []want{eInv("spec.partitionTypeAttribute")}},
		{name: "partitionTypeAttribute without domain", mutate: func(s *api.ResourceSlice) { s.Spec.PartitionTypeAttribute = ptr.To(api.FullyQualifiedName("profile")) },
			want: []want{eInv("spec.partitionTypeAttribute")}},
		{name: "partitionTypeAttribute missing on a consuming device", mutate: func(s *api.ResourceSlice) {
			delete(s.Spec.Devices[1].Attributes, "gpu.example.com/profile")
		}, want: []want{eReq("spec.devices[1].attributes[gpu.example.com/profile]")}},
		{name: "partitionTypeAttribute not a string", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[1].Attributes["gpu.example.com/profile"] = intAttr(1)
		}, want: []want{eInv("spec.devices[1].attributes[gpu.example.com/profile]")}},
		{name: "partitionTypeAttribute under its bare name", mutate: func(s *api.ResourceSlice) {
			delete(s.Spec.Devices[1].Attributes, "gpu.example.com/profile")
			s.Spec.Devices[1].Attributes["profile"] = strAttr("full")
		}},
		// skipNodeOperations
		{name: "unknown skipNodeOperation", mutate: func(s *api.ResourceSlice) { s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"Reboot"} },
			want: []want{eNotSupp("spec.skipNodeOperations[0]")}},
		{name: "duplicate skipNodeOperation", mutate: func(s *api.ResourceSlice) { s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{"*", "*"} },
			want: []want{eDup("spec.skipNodeOperations[1]")}},
		{name: "skip prepare but not unprepare", mutate: func(s *api.ResourceSlice) {
			s.Spec.SkipNodeOperations = []resourcev1.SkipNodeOperation{resourcev1.SkipNodeOperationNodePrepareResources}
		}, want: []want{eInv("spec.skipNodeOperations")}},
		// nodeAllocatableResources
		{name: "valid nodeAllocatableResources", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory":        {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("memory"), CapacityMultiplier: qp("1")}},
				"cpu":           {Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: qp("8")}, Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: qp("100m")}},
				"hugepages-2Mi": {Overhead: &resourcev1.NodeAllocatableOverhead{PerContainer: qp("2Mi")}},
			}
		}},
		{name: "nodeAllocatableResources with extended resource", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"example.com/foo": {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: qp("1")}}}
		}, want: []want{eInv(d0 + ".nodeAllocatableResources[example.com/foo]")}},
		{name: "nodeAllocatableResources without mapping or overhead", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{"cpu": {}}
		}, want: []want{eReq(d0 + ".nodeAllocatableResources[cpu]")}},
		{name: "nodeAllocatableResources unknown capacityKey", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("hbm"), CapacityMultiplier: qp("1")}}}
		}, want: []want{eNotFound(d0 + ".nodeAllocatableResources[memory].mapping.capacityKey")}},
		{name: "nodeAllocatableResources capacityKey without multiplier", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("memory")}}}
		}, want: []want{eReq(d0 + ".nodeAllocatableResources[memory].mapping.capacityMultiplier")}},
		{name: "nodeAllocatableResources non-positive deviceMultiplier", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"cpu": {Mapping: &resourcev1.NodeAllocatableMapping{DeviceMultiplier: qp("0")}}}
		}, want: []want{eInv(d0 + ".nodeAllocatableResources[cpu].mapping.deviceMultiplier")}},
		{name: "nodeAllocatableResources both mapping kinds", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("memory"), CapacityMultiplier: qp("1"), DeviceMultiplier: qp("1")}}}
		}, want: []want{eInv(d0 + ".nodeAllocatableResources[memory].mapping")}},
		{name: "nodeAllocatableResources empty overhead", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{"cpu": {Overhead: &resourcev1.NodeAllocatableOverhead{}}}
		}, want: []want{eInv(d0 + ".nodeAllocatableResources[cpu].overhead")}},
		{name: "nodeAllocatableResources negative overhead", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{"cpu": {Overhead: &resourcev1.NodeAllocatableOverhead{PerPod: qp("-1")}}}
		}, want: []want{eInv(d0 + ".nodeAllocatableResources[cpu].overhead.perPod")}},
	}
	runSliceCases(t, plainSlice, cases)
}

func runSliceCases(t *testing.T, defaultBase func() *api.ResourceSlice, cases []sliceCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			base := defaultBase
			if tc.base != nil {
				base = tc.base
			}
			s := base()
			if tc.mutate != nil {
				tc.mutate(s)
			}
			expectErrors(t, ResourceSlice(s), tc.want...)
			expectWarnings(t, ResourceSliceWarnings(s), tc.warn...)
		})
	}
}

func TestResourceSliceNil(t *testing.T) {
	expectErrors(t, ResourceSlice(nil), eReq("spec"))
}

// Validation must not change what it validates: AsDec on a Quantity changes
// its internal representation, and map iteration must not write.
func TestResourceSliceDoesNotMutate(t *testing.T) {
	s := plainSlice()
	consumableDevice(s, &resourcev1.CapacityRequestPolicy{Default: qp("2Gi"), ValidRange: &resourcev1.CapacityRequestPolicyRange{Min: qp("1Gi"), Step: qp("1Gi")}})
	before := s.DeepCopy()
	_ = ResourceSlice(s)
	if !deepEqual(t, before, s) {
		t.Fatal("ResourceSlice modified its input")
	}
}

// TestIsSemverRemembersOnlyMatches: asking twice gives the expression's
// answer both times, for versions it accepts and ones it rejects.
func TestIsSemverRemembersOnlyMatches(t *testing.T) {
	for _, s := range []string{"1.2.3", "12.6.0", "560.35.3", "1.0.0-rc.1+build.5", "1.2", "01.2.3", "1.2.3-01", "v1.2.3", "", "1.2.3 "} {
		want := semverRe.MatchString(s)
		for range 2 {
			if got := isSemver(s); got != want {
				t.Errorf("isSemver(%q) = %v, want %v", s, got, want)
			}
		}
	}
}
