package validation

import (
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

const (
	goodCEL = `device.attributes["gpu.example.com"].model == "a100"`
	r0      = "spec.devices.requests[0]"
	r0x     = r0 + ".exactly"
	r1      = "spec.devices.requests[1]"
	c0      = "spec.devices.constraints[0]"
	cfg0    = "spec.devices.config[0]"
)

func celSel(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

func opaque(driver, params string) resourcev1.DeviceConfiguration {
	return resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
		Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}
}

// costly is a derived attribute expression estimated at about 70 % of the
// claim-wide cost limit: one is allowed, two are not.
const costly = `device.attributes.map(d, device.attributes[d].map(k, device.attributes[d].map(j, j+k).size()).size())`

func validClaim() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu.example.com",
					Selectors:       []resourcev1.DeviceSelector{celSel(goodCEL)},
					AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
					Count:           2,
					Tolerations: []resourcev1.DeviceToleration{{Key: "example.com/maintenance",
						Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}},
					Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": q("10Gi")}},
				}},
				{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{
					{Name: "fast", DeviceClassName: "nic.example.com", AllocationMode: resourcev1.DeviceAllocationModeAll},
					{Name: "slow", DeviceClassName: "nic.example.com"},
				}},
			},
			Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"gpu", "nic/fast"}, MatchAttribute: ptr.To(resourcev1.FullyQualifiedName("example.com/numa"))}},
			Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"},
				DeviceConfiguration: opaque("gpu.example.com", `{"mode":"shared"}`)}},
		}},
	}
}

func exactly(c *resourcev1.ResourceClaim) *resourcev1.ExactDeviceRequest {
	return c.Spec.Devices.Requests[0].Exactly
}

func TestResourceClaim(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *resourcev1.ResourceClaim)
		want   []want
		warn   []string // field paths of ResourceClaimWarnings
	}{
		{name: "valid baseline"},
		{name: "namespace left to the client", mutate: func(c *resourcev1.ResourceClaim) { c.Namespace = "" }},
		{name: "invalid namespace", mutate: func(c *resourcev1.ResourceClaim) { c.Namespace = "ML" }, want: []want{eInv("metadata.namespace")}},
		{name: "invalid name", mutate: func(c *resourcev1.ResourceClaim) { c.Name = "Train" }, want: []want{eInv("metadata.name")}},
		// requests
		{name: "33 requests", mutate: func(c *resourcev1.ResourceClaim) {
			for i := range 31 {
				r := c.Spec.Devices.Requests[0]
				r.Name = fmt.Sprintf("r%d", i)
				c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, r)
			}
		}, want: []want{eTooMany("spec.devices.requests")}},
		{name: "request name invalid", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].Name = "NIC" },
			want: []want{eInv(r1 + ".name"), eInv(c0 + ".requests[1]")}},
		{name: "duplicate request name", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, c.Spec.Devices.Requests[0])
		}, want: []want{eDup("spec.devices.requests[2]")}},
		{name: "neither exactly nor firstAvailable", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable = nil },
			want: []want{eReq(r1), eInv(c0 + ".requests[1]")}},
		{name: "both exactly and firstAvailable", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[0].FirstAvailable = c.Spec.Devices.Requests[1].FirstAvailable
		}, want: []want{eInv(r0)}},
		{name: "deviceClassName missing", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).DeviceClassName = "" },
			want: []want{eReq(r0x + ".deviceClassName")}},
		{name: "deviceClassName invalid", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).DeviceClassName = "GPU_class" },
			want: []want{eInv(r0x + ".deviceClassName")}},
		// selectors
		{name: "33 selectors", mutate: func(c *resourcev1.ResourceClaim) {
			for range 32 {
				exactly(c).Selectors = append(exactly(c).Selectors, celSel(goodCEL))
			}
		}, want: []want{eTooMany(r0x + ".selectors")}},
		{name: "selector without cel", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Selectors = []resourcev1.DeviceSelector{{}} },
			want: []want{eReq(r0x + ".selectors[0].cel")}},
		{name: "selector does not compile", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Selectors = append(exactly(c).Selectors, celSel(`device.attributes["gpu.example.com"].model ==`))
		}, want: []want{eInv(r0x + ".selectors[1].cel.expression")}},
		{name: "selector not boolean", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Selectors = []resourcev1.DeviceSelector{celSel(`device.driver`)}
		},
			want: []want{eInv(r0x + ".selectors[0].cel.expression")}},
		{name: "selector empty", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Selectors = []resourcev1.DeviceSelector{celSel("")} },
			want: []want{eReq(r0x + ".selectors[0].cel.expression")}},
		{name: "selector too long", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Selectors = []resourcev1.DeviceSelector{celSel(goodCEL + strings.Repeat(" ", 10*1024))}
		}, want: []want{eTooLong(r0x + ".selectors[0].cel.expression")}},
		{name: "subrequest selector does not compile", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Requests[1].FirstAvailable[1].Selectors = []resourcev1.DeviceSelector{celSel("1 +")}
		}, want: []want{eInv(r1 + ".firstAvailable[1].selectors[0].cel.expression")}},
		// allocation mode
		{name: "unknown allocationMode", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).AllocationMode = "Some" },
			want: []want{eNotSupp(r0x + ".allocationMode")}},
		{name: "ExactCount with zero count", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Count = 0 },
			want: []want{eInv(r0x + ".count")}},
		{name: "All with count", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).AllocationMode = resourcev1.DeviceAllocationModeAll },
			want: []want{eInv(r0x + ".count")}},
		{name: "unset allocationMode and count are defaulted", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).AllocationMode, exactly(c).Count = "", 0 }},
		{name: "adminAccess", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).AdminAccess = ptr.To(true) }},
		// tolerations
		{name: "17 tolerations", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Tolerations = make([]resourcev1.DeviceToleration, 17)
		}, want: []want{eTooMany(r0x + ".tolerations")}},
		{name: "Exists toleration with value", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Tolerations[0].Value = "x" },
			want: []want{eInv(r0x + ".tolerations[0].value")}},
		{name: "Equal toleration with invalid value", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Tolerations[0].Operator, exactly(c).Tolerations[0].Value = resourcev1.DeviceTolerationOpEqual, "bad value"
		}, want: []want{eInv(r0x + ".tolerations[0].value")}},
		// An unset operator is defaulted to Equal (v1 DeviceToleration).
		{name: "toleration without operator", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Tolerations[0].Operator = "" }},
		{name: "toleration without operator, bad value", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).Tolerations[0].Operator, exactly(c).Tolerations[0].Value = "", "bad value"
		}, want: []want{eInv(r0x + ".tolerations[0].value")}},
		{name: "toleration unknown operator", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Tolerations[0].Operator = "Like" },
			want: []want{eNotSupp(r0x + ".tolerations[0].operator")}},
		{name: "toleration unknown effect", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Tolerations[0].Effect = "PreferNoSchedule" },
			want: []want{eNotSupp(r0x + ".tolerations[0].effect")}},
		{name: "toleration key invalid", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Tolerations[0].Key = "bad key" },
			want: []want{eInv(r0x + ".tolerations[0].key")}},
		// capacity requests
		// kube-apiserver does not validate capacity requests.
		// kube-apiserver 1.37 does not check the names (TestVersionRules).
		{name: "capacity request name invalid", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Capacity.Requests["bad name"] = q("1") },
			want: []want{eInv(r0x + ".capacity.requests[bad name]")}},
		{name: "negative capacity request", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Capacity.Requests["memory"] = q("-1Gi") },
			warn: []string{r0x + ".capacity.requests[memory]"}},
		// firstAvailable
		{name: "9 subrequests", mutate: func(c *resourcev1.ResourceClaim) {
			for i := range 7 {
				c.Spec.Devices.Requests[1].FirstAvailable = append(c.Spec.Devices.Requests[1].FirstAvailable,
					resourcev1.DeviceSubRequest{Name: fmt.Sprintf("s%d", i), DeviceClassName: "nic.example.com"})
			}
		}, want: []want{eTooMany(r1 + ".firstAvailable")}},
		{name: "duplicate subrequest", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[1].Name = "fast" },
			want: []want{eDup(r1 + ".firstAvailable[1]")}},
		{name: "subrequest name invalid", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[1].Name = "Slow" },
			want: []want{eInv(r1 + ".firstAvailable[1].name")}},
		{name: "subrequest without deviceClassName", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[0].DeviceClassName = "" },
			want: []want{eReq(r1 + ".firstAvailable[0].deviceClassName")}},
		{name: "subrequest ExactCount with negative count", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[1].Count = -1 },
			want: []want{eInv(r1 + ".firstAvailable[1].count")}},
		// constraints
		{name: "33 constraints", mutate: func(c *resourcev1.ResourceClaim) {
			for range 32 {
				c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, c.Spec.Devices.Constraints[0])
			}
		}, want: []want{eTooMany("spec.devices.constraints")}},
		{name: "constraint on unknown request", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "tpu" },
			want: []want{eInv(c0 + ".requests[1]")}},
		{name: "constraint on unknown subrequest", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "nic/medium" },
			want: []want{eInv(c0 + ".requests[1]")}},
		{name: "constraint on subrequest of an exactly request", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "gpu/fast" },
			want: []want{eInv(c0 + ".requests[1]")}},
		{name: "constraint reference with two slashes", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "nic/fast/x" },
			want: []want{eInv(c0 + ".requests[1]")}},
		{name: "constraint on a whole firstAvailable request", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "nic" }},
		{name: "duplicate constraint request", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests[1] = "gpu" },
			want: []want{eDup(c0 + ".requests[1]")}},
		{name: "constraint without attribute", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Constraints[0].MatchAttribute = nil },
			want: []want{eReq(c0)}},
		{name: "constraint with both attributes", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To(resourcev1.FullyQualifiedName("example.com/id"))
		}, warn: []string{c0}},
		{name: "constraint with both attributes, distinct invalid", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To(resourcev1.FullyQualifiedName("id"))
		}, want: []want{eInv(c0 + ".distinctAttribute")}, warn: []string{c0}},
		{name: "constraint attribute without domain", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].MatchAttribute = ptr.To(resourcev1.FullyQualifiedName("numa"))
		}, want: []want{eInv(c0 + ".matchAttribute")}},
		{name: "distinctAttribute invalid", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Constraints[0].MatchAttribute = nil
			c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To(resourcev1.FullyQualifiedName("example.com/bad name"))
		}, want: []want{eInv(c0 + ".distinctAttribute")}},
		// derived attributes
		{name: "derived attribute used by a constraint", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: `device.attributes["gpu.example.com"].numa`}}
		}},
		{name: "derived attribute not used by a constraint", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/pcie", Expression: "1"}}
		}, want: []want{eInv(r0x + ".derivedAttributes[0].name")}},
		{name: "derived attribute without expression", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa"}}
		}, want: []want{eReq(r0x + ".derivedAttributes[0].expression")}},
		{name: "derived attribute that does not compile", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: `device.attributes[`}}
		}, want: []want{eInv(r0x + ".derivedAttributes[0].expression")}},
		{name: "derived attribute that an attribute cannot hold", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: `{"a": 1}`}}
		}, want: []want{eInv(r0x + ".derivedAttributes[0].expression")}},
		{name: "derived attribute as a list", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: `["a", "b"]`}}
		}},
		{name: "derived attribute too complex", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: `device.attributes.map(d, ` + costly + `.size())`}}
			// kube-apiserver adds its cost to the claim's total as well.
		}, want: []want{eForb(r0x + ".derivedAttributes[0].expression"), eForb("spec.devices")}},
		{name: "derived attributes of a claim too complex together", mutate: func(c *resourcev1.ResourceClaim) {
			exactly(c).DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: costly}}
			c.Spec.Devices.Requests[1].FirstAvailable[0].DerivedAttributes = []resourcev1.DeviceDerivedAttribute{{Name: "example.com/numa", Expression: costly}}
		}, want: []want{eForb("spec.devices")}},
		// config
		{name: "33 configs", mutate: func(c *resourcev1.ResourceClaim) {
			for range 32 {
				c.Spec.Devices.Config = append(c.Spec.Devices.Config, c.Spec.Devices.Config[0])
			}
		}, want: []want{eTooMany("spec.devices.config")}},
		{name: "config for unknown request", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Requests = []string{"tpu"} },
			want: []want{eInv(cfg0 + ".requests[0]")}},
		{name: "config without opaque", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque = nil },
			want: []want{eReq(cfg0 + ".opaque")}},
		{name: "config driver invalid", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Driver = "gpu_example" },
			want: []want{eInv(cfg0 + ".opaque.driver")}},
		{name: "config without parameters", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Parameters.Raw = nil },
			want: []want{eReq(cfg0 + ".opaque.parameters")}},
		{name: "config parameters not an object", mutate: func(c *resourcev1.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`[1]`) },
			want: []want{eInv(cfg0 + ".opaque.parameters")}},
		{name: "config parameters too large", mutate: func(c *resourcev1.ResourceClaim) {
			c.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`{"x":"` + strings.Repeat("x", 10*1024) + `"}`)
		}, want: []want{eTooLong(cfg0 + ".opaque.parameters")}},
		// status
		{name: "allocation result for unknown request", mutate: func(c *resourcev1.ResourceClaim) {
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"},
				{Request: "tpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-1"},
			}}}
		}, warn: []string{"status.allocation.devices.results[1].request"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClaim()
			if tc.mutate != nil {
				tc.mutate(c)
			}
			expectErrors(t, ResourceClaim(c), tc.want...)
			expectWarnings(t, ResourceClaimWarnings(c), tc.warn...)
		})
	}
}

func TestResourceClaimTemplate(t *testing.T) {
	valid := func() *resourcev1.ResourceClaimTemplate {
		return &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"},
			Spec: resourcev1.ResourceClaimTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec:       validClaim().Spec,
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(t *resourcev1.ResourceClaimTemplate)
		want   []want
		warn   []string
	}{
		{name: "valid baseline"},
		{name: "invalid name", mutate: func(t *resourcev1.ResourceClaimTemplate) { t.Name = "-train" }, want: []want{eInv("metadata.name")}},
		{name: "claim metadata sets a name", mutate: func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Name = "fixed" }, want: []want{eForb("spec.metadata.name")}},
		{name: "claim metadata label invalid", mutate: func(t *resourcev1.ResourceClaimTemplate) { t.Spec.Labels["app"] = "-x-" }, want: []want{eInv("spec.metadata.labels")}},
		{name: "claim spec error", mutate: func(t *resourcev1.ResourceClaimTemplate) {
			t.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName = ""
		},
			want: []want{eReq("spec.spec.devices.requests[0].exactly.deviceClassName")}},
		{name: "claim spec warning", mutate: func(t *resourcev1.ResourceClaimTemplate) {
			t.Spec.Spec.Devices.Requests[0].Exactly.Capacity.Requests["memory"] = q("-1")
		}, warn: []string{"spec.spec.devices.requests[0].exactly.capacity.requests[memory]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := valid()
			if tc.mutate != nil {
				tc.mutate(tmpl)
			}
			expectErrors(t, ResourceClaimTemplate(tmpl), tc.want...)
			expectWarnings(t, ResourceClaimTemplateWarnings(tmpl), tc.warn...)
		})
	}
}

func TestDeviceClass(t *testing.T) {
	valid := func() *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
			Spec: resourcev1.DeviceClassSpec{
				Selectors:            []resourcev1.DeviceSelector{celSel(`device.driver == "gpu.example.com"`)},
				Config:               []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: opaque("gpu.example.com", `{}`)}},
				ExtendedResourceName: ptr.To("example.com/gpu"),
			},
		}
	}
	cases := []struct {
		name   string
		mutate func(c *resourcev1.DeviceClass)
		want   []want
	}{
		{name: "valid baseline"},
		{name: "invalid name", mutate: func(c *resourcev1.DeviceClass) { c.Name = "GPU" }, want: []want{eInv("metadata.name")}},
		{name: "namespace on cluster-scoped object", mutate: func(c *resourcev1.DeviceClass) { c.Namespace = "ml" }, want: []want{eForb("metadata.namespace")}},
		{name: "selector does not compile", mutate: func(c *resourcev1.DeviceClass) { c.Spec.Selectors[0] = celSel(`device.nosuchfield`) },
			want: []want{eInv("spec.selectors[0].cel.expression")}},
		{name: "33 selectors", mutate: func(c *resourcev1.DeviceClass) {
			for range 32 {
				c.Spec.Selectors = append(c.Spec.Selectors, c.Spec.Selectors[0])
			}
		}, want: []want{eTooMany("spec.selectors")}},
		{name: "33 configs", mutate: func(c *resourcev1.DeviceClass) {
			for range 32 {
				c.Spec.Config = append(c.Spec.Config, c.Spec.Config[0])
			}
		}, want: []want{eTooMany("spec.config")}},
		{name: "config without opaque", mutate: func(c *resourcev1.DeviceClass) { c.Spec.Config[0].Opaque = nil }, want: []want{eReq("spec.config[0].opaque")}},
		{name: "extendedResourceName native", mutate: func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("cpu") },
			want: []want{eInv("spec.extendedResourceName")}},
		{name: "extendedResourceName in kubernetes.io", mutate: func(c *resourcev1.DeviceClass) { c.Spec.ExtendedResourceName = ptr.To("kubernetes.io/gpu") },
			want: []want{eInv("spec.extendedResourceName")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			if tc.mutate != nil {
				tc.mutate(c)
			}
			expectErrors(t, DeviceClass(c), tc.want...)
		})
	}
	expectErrors(t, DeviceClass(nil), eReq("spec"))
	expectErrors(t, ResourceClaim(nil), eReq("spec"))
	expectErrors(t, ResourceClaimTemplate(nil), eReq("spec"))
}
