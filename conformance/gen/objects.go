package gen

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/coretest"
)

// Drivers used by the generator and the benchmarks.
const (
	GPUDriver   = "gpu.example.com"
	AccDriver   = "acc.example.com"
	NICDriver   = "nic.example.com"
	TPUDriver   = "tpu.example.com"
	PlainDriver = "plain.example.com"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }
func qp(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func sattr(s string) api.DeviceAttribute { return api.DeviceAttribute{StringValue: ptr.To(s)} }
func iattr(i int) api.DeviceAttribute    { return api.DeviceAttribute{IntValue: ptr.To(int64(i))} }
func battr(b bool) api.DeviceAttribute   { return api.DeviceAttribute{BoolValue: ptr.To(b)} }

func counters(kv ...any) map[string]api.Counter {
	out := make(map[string]api.Counter, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = api.Counter{Value: *resource.NewQuantity(int64(kv[i+1].(int)), resource.DecimalSI)}
	}
	return out
}

// Node returns a node with the labels the generator selects on.
func Node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, UID: types.UID("uid-" + name)}}
}

// DriverIs is the CEL selector for a driver.
func DriverIs(d string) string { return fmt.Sprintf("device.driver == %q", d) }

// AttrIs is the CEL selector attribute == string value.
func AttrIs(driver, attr, val string) string {
	return fmt.Sprintf("device.attributes[%q].%s == %q", driver, attr, val)
}

// Slice returns an empty ResourceSlice of pool with generation 1.
func Slice(name, driver, pool string, count int64) *api.ResourceSlice {
	return &api.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.ResourceSliceSpec{
			Driver: driver,
			Pool:   api.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: count},
		},
	}
}

// Claim returns a claim with the given requests (no constraints), typed
// as the generator's scenarios store it.
func Claim(name string, reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	c := coretest.Claim(name).Obj()
	c.TypeMeta = metav1.TypeMeta{APIVersion: api.APIVersion, Kind: "ResourceClaim"}
	c.Spec.Devices.Requests = reqs
	return c
}

// Exact returns a request for count devices of class with selectors.
func Exact(name, class string, count int64, selectors ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
	}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: s}})
	}
	return r
}

// MatchAttribute adds a matchAttribute constraint over the named requests
// (all when none).
func MatchAttribute(c *resourcev1.ResourceClaim, attr string, requests ...string) {
	a := resourcev1.FullyQualifiedName(attr)
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourcev1.DeviceConstraint{Requests: requests, MatchAttribute: &a})
}

// DistinctAttribute adds a distinctAttribute constraint.
func DistinctAttribute(c *resourcev1.ResourceClaim, attr string, requests ...string) {
	a := resourcev1.FullyQualifiedName(attr)
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourcev1.DeviceConstraint{Requests: requests, DistinctAttribute: &a})
}
