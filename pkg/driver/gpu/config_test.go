package gpu_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

const head = `"apiVersion":"gpu.dractl.dev/v1alpha1","kind":"GpuConfig"`

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in     string
		slices uint32
		gi     string
		err    string
	}{
		{in: `{` + head + `}`},
		{in: `{` + head + `,"computeInstanceProfile":"1c.3g.20gb"}`, slices: 1, gi: "3g.20gb"},
		{in: `{` + head + `,"computeInstanceProfile":"2c"}`, slices: 2},
		{in: `{` + head + `,"computeInstanceProfile":"1c.1g.10gb+me"}`, slices: 1, gi: "1g.10gb+me"},
		{in: `{` + head + `,"timeSlicing":{"interval":"Medium"}}`},
		{in: `{` + head + `,"computeInstanceProfile":"3g.20gb"}`, err: `computeInstanceProfile: invalid value "3g.20gb": expected <slices>c or <slices>c.<GPU instance profile>`},
		{in: `{` + head + `,"computeInstanceProfile":"0c"}`, err: `invalid value "0c"`},
		{in: `{` + head + `,"timeSlicing":{"interval":"short"}}`, err: `timeSlicing.interval: unsupported value "short": expected one of Default, Short, Medium, Long`},
		{in: `{` + head + `,"timeSlicing":{}}`, err: `timeSlicing.interval: unsupported value ""`},
		{in: `{` + head + `,"sharing":{}}`, err: `json: unknown field "sharing"`},
		{in: `{"apiVersion":"gpu.dractl.dev/v1","kind":"GpuConfig"}`, err: `apiVersion "gpu.dractl.dev/v1", kind "GpuConfig": expected apiVersion "gpu.dractl.dev/v1alpha1", kind "GpuConfig"`},
		{in: `{"apiVersion":"gpu.dractl.dev/v1alpha1"}`, err: `kind ""`},
		{in: `[]`, err: "not a gpu.dractl.dev/v1alpha1 GpuConfig"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			c, err := gpu.Decode(raw(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, gi := c.ComputeSlices(); n != tc.slices || gi != tc.gi {
				t.Fatalf("compute slices %d of %q, want %d of %q", n, gi, tc.slices, tc.gi)
			}
		})
	}
}

// TestEffective: later configurations override earlier ones field by
// field; a field a later one leaves unset keeps its earlier value.
func TestEffective(t *testing.T) {
	dec := func(s string) prepare.DeviceConfig {
		c, err := gpu.Decode(raw(`{` + head + s + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return prepare.DeviceConfig{Decoded: c}
	}
	dev := prepare.AllocatedDevice{Configs: []prepare.DeviceConfig{
		dec(`,"computeInstanceProfile":"1c","timeSlicing":{"interval":"Long"}`),
		dec(`,"timeSlicing":{"interval":"Short"}`),
		dec(``),
	}}
	got := gpu.Effective(dev)
	if got.ComputeInstanceProfile != "1c" || got.TimeSlicing == nil || got.TimeSlicing.Interval != "Short" {
		t.Fatalf("effective %+v", got)
	}
	if env := got.Env("P_"); !slices.Equal(env, []string{"P_TIMESLICE_INTERVAL=Short"}) {
		t.Fatalf("env %v", env)
	}
	if env := gpu.Effective(prepare.AllocatedDevice{}).Env("P_"); len(env) != 0 {
		t.Fatalf("no configuration, env %v", env)
	}
}
