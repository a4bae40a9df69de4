package cel

import (
	"context"
	"fmt"
	"testing"

	"github.com/dractl/dractl/pkg/core/api"
)

// benchView is a device of 20 attributes, ten of its own and ten from two
// mixins; the selected attribute comes from the second mixin, so the
// look-up walks the device and one mixin before it finds it.
func benchView(b *testing.B) api.DeviceView {
	own, m1, m2 := attrs{}, attrs{}, attrs{}
	for i := range 10 {
		own[api.QualifiedName(fmt.Sprintf("own%d", i))] = num(int64(i))
	}
	for i := range 5 {
		m1[api.QualifiedName(fmt.Sprintf("gpu.nvidia.com/first%d", i))] = str("v")
		m2[api.QualifiedName(fmt.Sprintf("second%d", i))] = boolean(true)
	}
	m2["profile"] = str("1g.10gb")
	delete(m2, "second4")
	spec := &api.ResourceSliceSpec{
		Driver: "gpu.nvidia.com",
		Mixins: &api.ResourceSliceMixins{Device: []api.DeviceMixin{
			{Name: "m1", Attributes: m1},
			{Name: "m2", Attributes: m2},
		}},
		Devices: []api.Device{{Name: "gpu-0", Includes: []string{"m1", "m2"}, Attributes: own}},
	}
	v := viewsOf(b, spec)["gpu-0"]
	if n := v.NumAttributesAndCapacities(); n != 20 {
		b.Fatalf("bench device has %d attributes, want 20", n)
	}
	return v
}

func benchmarkSelector(b *testing.B, expr string) {
	p, err := NewCompiler().Compile(expr)
	if err != nil {
		b.Fatal(err)
	}
	d := Device{Driver: "gpu.nvidia.com", View: benchView(b)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.Matches(ctx, d)
		if err != nil || !ok {
			b.Fatalf("Matches = %v, %v; want true", ok, err)
		}
	}
}

func BenchmarkMatchesProfile(b *testing.B) {
	benchmarkSelector(b, `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`)
}

func BenchmarkMatchesOtherDomain(b *testing.B) {
	benchmarkSelector(b, `device.attributes["gpu.nvidia.com"].first3 == "v" && device.driver == "gpu.nvidia.com"`)
}

func BenchmarkMatchesIterate(b *testing.B) {
	benchmarkSelector(b, `device.attributes["gpu.nvidia.com"].exists(k, k == "profile")`)
}

func BenchmarkMatchesTrue(b *testing.B) { benchmarkSelector(b, `true`) }
