package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

const testDriver = "gpu.example.com"

// nullProfile creates nothing; it is the Profile of a driver that takes
// no configuration.
type nullProfile struct{}

func (nullProfile) CreatePartition(_ context.Context, _ types.UID, d AllocatedDevice) (Partition, error) {
	return Partition{ID: d.Device, Pool: d.Pool, Device: d.Device}, nil
}
func (nullProfile) DestroyPartition(context.Context, Partition) error { return nil }
func (nullProfile) Partitions(context.Context) ([]Partition, error)   { return nil, nil }
func (nullProfile) ContainerEdits(types.UID, AllocatedDevice, Partition) cdispec.ContainerEdits {
	return cdispec.ContainerEdits{}
}

// nameProfile decodes {"name": "..."} and refuses anything else; it
// counts its decodes.
type nameProfile struct {
	nullProfile
	decodes *int
}

func (p nameProfile) DecodeConfig(raw runtime.RawExtension) (any, error) {
	*p.decodes++
	var v struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw.Raw, &v); err != nil || v.Name == "" {
		return nil, fmt.Errorf("want {\"name\": ...}, got %s", raw.Raw)
	}
	return v.Name, nil
}

func opaque(driver string, source resourcev1.AllocationConfigSource, name string, requests ...string) resourcev1.DeviceAllocationConfiguration {
	return resourcev1.DeviceAllocationConfiguration{
		Source: source, Requests: requests,
		DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"name":"` + name + `"}`)},
		}},
	}
}

const (
	class = resourcev1.AllocationConfigSourceClass
	claim = resourcev1.AllocationConfigSourceClaim
)

// TestResolveConfigs holds the rules by which configurations reach a
// device: this driver's only, matched by request (a subrequest by its
// parent's name too), class before claim whatever the allocation's
// order, each decoded once; and the refusals, each naming claim, request
// and index.
func TestResolveConfigs(t *testing.T) {
	results := []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: testDriver, Pool: "p", Device: "d0"},
		{Request: "gpu", Driver: testDriver, Pool: "p", Device: "d1"},
		{Request: "mig/small", Driver: testDriver, Pool: "p", Device: "d2"},
		{Request: "nic", Driver: "nic.example.com", Pool: "p", Device: "n0"},
	}
	for _, tc := range []struct {
		name    string
		configs []resourcev1.DeviceAllocationConfiguration
		plain   bool // the Profile takes no configuration
		// want: per device of this driver, the decoded names in order.
		want    [3][]string
		decodes int
		err     string
	}{
		{name: "none"},
		{
			name:    "no requests: every device",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, claim, "all")},
			want:    [3][]string{{"all"}, {"all"}, {"all"}}, decodes: 1,
		},
		{
			name:    "by request",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, class, "g", "gpu")},
			want:    [3][]string{{"g"}, {"g"}, nil}, decodes: 1,
		},
		{
			name: "a subrequest by its own or its parent's name, not a sibling's",
			configs: []resourcev1.DeviceAllocationConfiguration{
				opaque(testDriver, class, "sub", "mig/small"), opaque(testDriver, claim, "parent", "mig"), opaque(testDriver, claim, "sibling", "mig/big"),
			},
			want: [3][]string{nil, nil, {"sub", "parent"}}, decodes: 2,
		},
		{
			name: "class before claim whatever the order",
			configs: []resourcev1.DeviceAllocationConfiguration{
				opaque(testDriver, claim, "claim-1"), opaque(testDriver, class, "class-1", "gpu"),
				opaque(testDriver, claim, "claim-2", "gpu"), opaque(testDriver, class, "class-2", "gpu"),
			},
			want:    [3][]string{{"class-1", "class-2", "claim-1", "claim-2"}, {"class-1", "class-2", "claim-1", "claim-2"}, {"claim-1"}},
			decodes: 4,
		},
		{
			name: "other drivers' configurations are theirs",
			configs: []resourcev1.DeviceAllocationConfiguration{
				opaque("nic.example.com", claim, "nic"), opaque("nic.example.com", claim, "nic", "gpu"),
			},
		},
		{
			name:    "for other requests only: not decoded",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, claim, "", "nic")},
		},
		{
			name:    "undecodable",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, class, "ok", "gpu"), opaque(testDriver, claim, "", "mig")},
			decodes: 2,
			err:     `claim ns/c, request "mig/small": status.allocation.devices.config[1] (FromClaim): opaque.parameters: want {"name": ...}, got {"name":""}`,
		},
		{
			name:    "a driver without configuration",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, claim, "x", "gpu")},
			plain:   true,
			err:     `claim ns/c, request "gpu": status.allocation.devices.config[0] (FromClaim): driver gpu.example.com takes no configuration`,
		},
		{
			name:    "a driver without configuration, configurations for others",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque("nic.example.com", claim, "x")},
			plain:   true,
		},
		{
			name:    "not opaque",
			configs: []resourcev1.DeviceAllocationConfiguration{{Source: claim, Requests: []string{"gpu"}}},
			err:     `claim ns/c, request "gpu": status.allocation.devices.config[0] (FromClaim): opaque: required`,
		},
		{
			name:    "unknown source",
			configs: []resourcev1.DeviceAllocationConfiguration{opaque(testDriver, claim, "a"), opaque(testDriver, "FromNowhere", "b")},
			err:     `claim ns/c: status.allocation.devices.config[1] (FromNowhere): source "FromNowhere": expected FromClass or FromClaim`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decodes := 0
			var profile Profile = nameProfile{decodes: &decodes}
			if tc.plain {
				profile = nullProfile{}
			}
			k := &Kit{cfg: Config{DriverName: testDriver}, profile: profile}
			c := &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid"},
				Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
					Results: results, Config: tc.configs,
				}}},
			}
			devices, err := k.devicesOf(c)
			if err != nil {
				t.Fatal(err)
			}
			err = k.resolveConfigs(c, devices)
			if decodes != tc.decodes {
				t.Errorf("%d decodes, want %d", decodes, tc.decodes)
			}
			if tc.err != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a ConfigError containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(devices) != 3 {
				t.Fatalf("%d devices of the driver, want 3", len(devices))
			}
			for i, d := range devices {
				var got []string
				for _, c := range d.Configs {
					got = append(got, c.Decoded.(string))
					if !json.Valid(c.Parameters.Raw) || c.Index < 0 || c.Index >= len(tc.configs) || tc.configs[c.Index].Source != c.Source {
						t.Errorf("device %s: config %+v does not point back at its allocation entry", d.Device, c)
					}
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("device %s (request %s): configs %v, want %v", d.Device, d.Request, got, tc.want[i])
				}
			}
		})
	}
}

// TestRequestGroups: what a container can get together is a top-level
// request's devices, subrequests included.
func TestRequestGroups(t *testing.T) {
	devices := []PreparedDevice{
		{AllocatedDevice: AllocatedDevice{Request: "a", Device: "0"}},
		{AllocatedDevice: AllocatedDevice{Request: "b/x", Device: "1"}},
		{AllocatedDevice: AllocatedDevice{Request: "a", Device: "2"}},
		{AllocatedDevice: AllocatedDevice{Request: "b/x", Device: "3"}},
	}
	names, groups := requestGroups(devices)
	if !slices.Equal(names, []string{"a", "b"}) || len(groups) != 2 || !slices.Equal(groups[0], []int{0, 2}) || !slices.Equal(groups[1], []int{1, 3}) {
		t.Fatalf("groups %v %v", names, groups)
	}
}
