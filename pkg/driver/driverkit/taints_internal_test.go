package driverkit

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
	"github.com/dractl/dractl/pkg/driver/publish"
)

// TestHealthTaints: which devices get which taint from what a Profile
// reports, on the pool of two A100s as pkg/driver/mig publishes it.
func TestHealthTaints(t *testing.T) {
	const pool = "node-1"
	n := mig.Node{Driver: "gpu.dractl.dev", Node: pool, Model: &mig.A100, GPUs: 2, DriverVersion: "550.54.15", CUDADriverVersion: "12.4.0"}
	published, err := publish.Build(n.Driver, pool, n.Slices(mig.Mixins))
	if err != nil {
		t.Fatal(err)
	}
	inv := prepare.InventoryOf(published.Resources)
	key := func(d string) prepare.DeviceKey { return prepare.DeviceKey{Pool: pool, Device: d} }
	gpu0 := key(mig.GPUDeviceName(0))
	small := key(mig.MIGDeviceName(0, "1g.5gb", 0))
	other := key(mig.MIGDeviceName(1, "1g.5gb", 0))
	perGPU := mig.A100.DevicesPerGPU()

	for _, tc := range []struct {
		name               string
		unhealthy, notices map[prepare.DeviceKey]string
		cfg                HealthTaints
		// tainted is how many devices have a taint; want the taints of
		// the devices checked.
		tainted int
		want    map[prepare.DeviceKey][]api.DeviceTaint
		unknown []prepare.DeviceKey
	}{
		{name: "healthy", tainted: 0, want: map[prepare.DeviceKey][]api.DeviceTaint{gpu0: nil}},
		{
			name:      "a GPU taints its partitions",
			unhealthy: map[prepare.DeviceKey]string{gpu0: "XID 79: fallen off the bus"},
			tainted:   perGPU,
			want: map[prepare.DeviceKey][]api.DeviceTaint{
				gpu0:  {{Key: TaintKeyUnhealthy, Value: "XID-79-fallen-off-the-bus", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
				small: {{Key: TaintKeyUnhealthy, Value: "XID-79-fallen-off-the-bus", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
				other: nil,
			},
		},
		{
			name:      "a partition alone",
			unhealthy: map[prepare.DeviceKey]string{small: "ECC"},
			tainted:   1,
			want:      map[prepare.DeviceKey][]api.DeviceTaint{small: {{Key: TaintKeyUnhealthy, Value: "ECC", Effect: resourcev1.DeviceTaintEffectNoSchedule}}, gpu0: nil},
		},
		{
			name:      "evict on opt-in",
			unhealthy: map[prepare.DeviceKey]string{small: "ECC"},
			cfg:       HealthTaints{Evict: true},
			tainted:   1,
			want:      map[prepare.DeviceKey][]api.DeviceTaint{small: {{Key: TaintKeyUnhealthy, Value: "ECC", Effect: resourcev1.DeviceTaintEffectNoExecute}}},
		},
		{
			name:    "notices off",
			notices: map[prepare.DeviceKey]string{other: "XID 43"},
			tainted: 0,
		},
		{
			name:      "notices on, after the unhealthy taint",
			unhealthy: map[prepare.DeviceKey]string{other: "XID 79"},
			notices:   map[prepare.DeviceKey]string{other: "XID 43"},
			cfg:       HealthTaints{Notices: true},
			tainted:   1,
			want: map[prepare.DeviceKey][]api.DeviceTaint{other: {
				{Key: TaintKeyUnhealthy, Value: "XID-79", Effect: resourcev1.DeviceTaintEffectNoSchedule},
				{Key: TaintKeyHealthEvent, Value: "XID-43", Effect: resourcev1.DeviceTaintEffectNone},
			}},
		},
		{
			name:      "devices not published",
			unhealthy: map[prepare.DeviceKey]string{key("gpu-7"): "gone", {Pool: "elsewhere", Device: gpu0.Device}: "gone"},
			notices:   map[prepare.DeviceKey]string{key("7"): "x"},
			cfg:       HealthTaints{Notices: true},
			tainted:   0,
			unknown:   []prepare.DeviceKey{{Pool: "elsewhere", Device: gpu0.Device}, key("gpu-7"), key("7")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, unknown := healthTaints(inv, tc.unhealthy, tc.notices, tc.cfg)
			if len(got) != tc.tainted {
				t.Errorf("%d devices tainted, want %d: %v", len(got), tc.tainted, got)
			}
			for k, want := range tc.want {
				if !(taintSet{k: got[k]}).equal(taintSet{k: want}) {
					t.Errorf("%s: taints %+v, want %+v", k, got[k], want)
				}
			}
			if len(unknown) != len(tc.unknown) {
				t.Fatalf("unknown %v, want %v", unknown, tc.unknown)
			}
			for i := range unknown {
				if unknown[i] != tc.unknown[i] {
					t.Errorf("unknown %v, want %v", unknown, tc.unknown)
				}
			}
		})
	}
}

// TestTaintsPassAdmission: tainted, the pool still builds (the taints are
// valid label values, counted against v1's limits), and the flattened
// slices carry them.
func TestTaintsPassAdmission(t *testing.T) {
	const pool = "node-1"
	n := mig.Node{Driver: "gpu.dractl.dev", Node: pool, Model: &mig.H100, GPUs: 8, DriverVersion: "550.54.15", CUDADriverVersion: "12.4.0"}
	desc := n.Slices(mig.Mixins)
	first, err := publish.Build(n.Driver, pool, desc)
	if err != nil {
		t.Fatal(err)
	}
	reason := strings.Repeat("XID 79: the GPU has fallen off the bus; ", 5)
	taints, _ := healthTaints(prepare.InventoryOf(first.Resources), map[prepare.DeviceKey]string{{Pool: pool, Device: mig.GPUDeviceName(3)}: reason},
		map[prepare.DeviceKey]string{{Pool: pool, Device: mig.GPUDeviceName(5)}: "XID 13"}, HealthTaints{Notices: true, Evict: true})
	published, err := publish.BuildTainted(nil, n.Driver, pool, desc, taints.of)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range published.Slices {
		for _, d := range s.Spec.Devices {
			want := taints[prepare.DeviceKey{Pool: pool, Device: d.Name}]
			if !(taintSet{{}: d.Taints}).equal(taintSet{{}: want}) {
				t.Errorf("%s: published taints %+v, want %+v", d.Name, d.Taints, want)
			}
			found += len(d.Taints)
		}
	}
	if found != 2*mig.H100.DevicesPerGPU() {
		t.Errorf("%d taints published, want one on each device of two GPUs (%d)", found, 2*mig.H100.DevicesPerGPU())
	}
	if v := taints[prepare.DeviceKey{Pool: pool, Device: mig.GPUDeviceName(3)}][0].Value; len(v) != 63 || strings.HasSuffix(v, "-") {
		t.Errorf("value %q: want the reason cut to a 63-character label value", v)
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"XID 79":                     "XID-79",
		"XID 79: fallen off the bus": "XID-79-fallen-off-the-bus",
		"  ECC (double bit) \n":      "ECC-double-bit",
		"ok.value_1":                 "ok.value_1",
		"äöü":                        "",
		"":                           "",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
