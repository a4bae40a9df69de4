package cel

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

const gpuDriver = "gpu.nvidia.com"

// fixture is one slice of driver gpu.nvidia.com whose devices get most of
// their attributes from two mixins, so every case below also checks the
// KEP-5234 precedence: device over mixins, later mixin over earlier.
func fixture(t testing.TB) map[string]api.DeviceView {
	spec := &api.ResourceSliceSpec{
		Driver: gpuDriver,
		Mixins: &api.ResourceSliceMixins{Device: []api.DeviceMixin{{
			Name: "base",
			Attributes: attrs{
				"profile":              str("from-base"),
				"arch":                 str("ampere"),
				"family":               str("base"),
				"cuda":                 ver("12.0.0"),
				"dra.example.com/zone": str("a"),
				"cores":                {IntValues: []int64{1, 2, 3}},
			},
			Capacity: caps{"memory": quant("10Gi"), "multiprocessors": quant("14")},
		}, {
			Name: "override",
			Attributes: attrs{
				"family": str("override"),
				"cuda":   ver("12.2.0"),
			},
			Capacity: caps{"memory": quant("40Gi")},
		}}},
		Devices: []api.Device{{
			Name:     "gpu-0",
			Includes: []string{"base", "override"},
			Attributes: attrs{
				"profile":               str("1g.10gb"),
				"index":                 num(0),
				"healthy":               boolean(true),
				"gpu.nvidia.com/serial": str("S-1"),
				"features":              {StringValues: []string{"nvlink", "mig"}},
				"flags":                 {BoolValues: []bool{true, false}},
				"firmwares":             {VersionValues: []string{"1.0.0", "2.1.0"}},
				"badVersion":            ver("not-a-version"),
				"empty":                 {},
			},
			Capacity: caps{"dra.example.com/slices": quant("2")},
		}, {
			Name:                     "shared",
			AllowMultipleAllocations: ptr.To(true),
			Attributes:               attrs{"profile": str("7g.40gb")},
		}, {
			// Both spellings of one driver-domain name; see findAttribute().
			Name:       "twice",
			Includes:   []string{"base"},
			Attributes: attrs{"gpu.nvidia.com/family": str("long")},
		}},
	}
	return viewsOf(t, spec)
}

func TestMatches(t *testing.T) {
	views := fixture(t)
	c := NewCompiler()
	tests := []struct {
		name, expr string
		device     string // default gpu-0
		driver     string // default gpuDriver
		want       bool
		wantErr    string
	}{
		{name: "driver", expr: `device.driver == "gpu.nvidia.com"`, want: true},
		{name: "driver of another device", expr: `device.driver == "gpu.nvidia.com"`, driver: "other.example.com", want: false},
		{name: "allowMultipleAllocations unset is false", expr: `device.allowMultipleAllocations`, want: false},
		{name: "allowMultipleAllocations set", expr: `device.allowMultipleAllocations`, device: "shared", want: true},

		// Attribute types.
		{name: "string", expr: `device.attributes["gpu.nvidia.com"].profile == "1g.10gb"`, want: true},
		{name: "int", expr: `device.attributes["gpu.nvidia.com"].index == 0 && device.attributes["gpu.nvidia.com"].index < 1`, want: true},
		{name: "bool", expr: `device.attributes["gpu.nvidia.com"].healthy == true`, want: true},
		{name: "dyn result that is a bool", expr: `device.attributes["gpu.nvidia.com"].healthy`, want: true},
		{name: "version compareTo", expr: `device.attributes["gpu.nvidia.com"].cuda.compareTo(semver("12.2.0")) == 0`, want: true},
		{name: "version isGreaterThan", expr: `device.attributes["gpu.nvidia.com"].cuda.isGreaterThan(semver("12.1.9"))`, want: true},
		{name: "version isLessThan", expr: `device.attributes["gpu.nvidia.com"].cuda.isLessThan(semver("12.2.0"))`, want: false},
		{name: "version major", expr: `device.attributes["gpu.nvidia.com"].cuda.major() == 12`, want: true},
		{name: "isSemver", expr: `isSemver("1.2.3") && !isSemver("1.2")`, want: true},
		{name: "ints list", expr: `device.attributes["gpu.nvidia.com"].cores.exists(c, c == 3) && size(device.attributes["gpu.nvidia.com"].cores) == 3`, want: true},
		{name: "ints list sum", expr: `device.attributes["gpu.nvidia.com"].cores.sum() == 6`, want: true},
		{name: "strings list in", expr: `"mig" in device.attributes["gpu.nvidia.com"].features`, want: true},
		{name: "strings list not in", expr: `"sriov" in device.attributes["gpu.nvidia.com"].features`, want: false},
		{name: "bools list", expr: `device.attributes["gpu.nvidia.com"].flags == [true, false]`, want: true},
		{name: "versions list", expr: `device.attributes["gpu.nvidia.com"].firmwares.exists(v, v.isGreaterThan(semver("2.0.0")))`, want: true},
		{name: "includes on a list attribute", expr: `device.attributes["gpu.nvidia.com"].features.includes("nvlink")`, want: true},

		// Capacity.
		{name: "quantity compareTo from later mixin", expr: `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("10Gi")) >= 0`, want: true},
		{name: "quantity equals later mixin", expr: `device.capacity["gpu.nvidia.com"].memory == quantity("40Gi")`, want: true},
		{name: "quantity isGreaterThan", expr: `device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))`, want: false},
		{name: "quantity from first mixin", expr: `device.capacity["gpu.nvidia.com"].multiprocessors.asInteger() == 14`, want: true},
		{name: "quantity in another domain", expr: `device.capacity["dra.example.com"].slices.isLessThan(quantity("3"))`, want: true},
		{name: "capacity and attributes are separate", expr: `"memory" in device.attributes["gpu.nvidia.com"]`, want: false},

		// Domains.
		{name: "qualified name in the driver domain", expr: `device.attributes["gpu.nvidia.com"].serial == "S-1"`, want: true},
		{name: "short name belongs to driver domain only", expr: `has(device.attributes["dra.example.com"].profile)`, want: false},
		{name: "other domain from mixin", expr: `device.attributes["dra.example.com"].zone == "a"`, want: true},
		{name: "other domain not in driver domain", expr: `has(device.attributes["gpu.nvidia.com"].zone)`, want: false},
		{name: "short names follow the driver", expr: `device.attributes["other.example.com"].profile == "1g.10gb" && device.attributes["gpu.nvidia.com"].serial == "S-1" && size(device.attributes["gpu.nvidia.com"]) == 1`, driver: "other.example.com", want: true},
		{name: "bind a domain", expr: `cel.bind(g, device.attributes["gpu.nvidia.com"], g.profile == "1g.10gb" && g.family == "override")`, want: true},

		// Mixins.
		{name: "device's own wins over mixin", expr: `device.attributes["gpu.nvidia.com"].profile != "from-base"`, want: true},
		{name: "later mixin wins", expr: `device.attributes["gpu.nvidia.com"].family == "override"`, want: true},
		{name: "mixin-only attribute", expr: `device.attributes["gpu.nvidia.com"].arch == "ampere"`, want: true},
		{name: "both spellings: short one wins", expr: `device.attributes["gpu.nvidia.com"].family == "base" && size(device.attributes["gpu.nvidia.com"]) == 5`, device: "twice", want: true},

		// Presence.
		{name: "has missing attribute", expr: `has(device.attributes["gpu.nvidia.com"].missing)`, want: false},
		{name: "has present attribute", expr: `has(device.attributes["gpu.nvidia.com"].arch)`, want: true},
		{name: "in missing attribute", expr: `"missing" in device.attributes["gpu.nvidia.com"]`, want: false},
		{name: "in present mixin attribute", expr: `"family" in device.attributes["gpu.nvidia.com"]`, want: true},
		{name: "in domain with entries", expr: `"dra.example.com" in device.attributes && "dra.example.com" in device.capacity`, want: true},
		{name: "in domain without entries", expr: `"other.example.com" in device.attributes`, want: false},
		// Upstream maps every domain to at least an empty map, so has()
		// on a domain is always true.
		{name: "has on any domain", expr: `has(device.attributes.unknown)`, want: true},
		{name: "missing domain is empty", expr: `size(device.attributes["other.example.com"]) == 0 && device.capacity["other.example.com"] == {}`, want: true},
		{name: "optional on missing", expr: `device.attributes["gpu.nvidia.com"].?missing.orValue("dflt") == "dflt"`, want: true},
		{name: "optional on present", expr: `device.attributes["gpu.nvidia.com"].?arch.orValue("dflt") == "ampere"`, want: true},

		// Iteration agrees with look-ups.
		{name: "size of driver domain", expr: `size(device.attributes["gpu.nvidia.com"]) == 13`, want: true},
		{name: "size of domains", expr: `size(device.attributes) == 2 && size(device.capacity) == 2`, want: true},
		{name: "all domains", expr: `device.attributes.all(d, d in ["gpu.nvidia.com", "dra.example.com"])`, want: true},
		{name: "exists key from mixin", expr: `device.attributes["gpu.nvidia.com"].exists(k, k == "arch")`, want: true},
		{name: "two-variable exists", expr: `device.capacity["gpu.nvidia.com"].exists(k, v, k == "memory" && v == quantity("40Gi"))`, want: true},
		{name: "map equality", expr: `device.attributes["dra.example.com"] == {"zone": "a"}`, want: true},
		{name: "map inequality", expr: `device.attributes["dra.example.com"] == {"zone": "b"}`, want: false},

		// Libraries.
		{name: "regex", expr: `device.attributes["gpu.nvidia.com"].profile.matches("^[0-9]g\\.[0-9]+gb$")`, want: true},
		{name: "strings ext", expr: `device.attributes["gpu.nvidia.com"].arch.upperAscii().startsWith("AMP")`, want: true},
		{name: "sets ext", expr: `sets.contains(device.attributes["gpu.nvidia.com"].features, ["mig"])`, want: true},

		// Runtime errors.
		{name: "missing key", expr: `device.attributes["gpu.nvidia.com"].missing == "x"`, wantErr: "no such key: missing"},
		{name: "missing key hint", expr: `device.attributes["gpu.nvidia.com"].missing == "x"`, wantErr: "has()"},
		{name: "dyn result that is not a bool", expr: `device.attributes["gpu.nvidia.com"].profile`, wantErr: "must evaluate to bool, got string"},
		{name: "bad version", expr: `device.attributes["gpu.nvidia.com"].badVersion.major() == 1`, wantErr: `parse semantic version "not-a-version"`},
		{name: "attribute without value", expr: `device.attributes["gpu.nvidia.com"].empty == 1`, wantErr: "no value set"},
		{name: "type mismatch", expr: `device.attributes["gpu.nvidia.com"].profile > 1`, wantErr: "no such overload"},
		// An untouched bad attribute does not matter: values are only
		// converted when read.
		{name: "bad version unread", expr: `device.attributes["gpu.nvidia.com"].index == 0`, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := c.Compile(tc.expr)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			dev, driver := "gpu-0", gpuDriver
			if tc.device != "" {
				dev = tc.device
			}
			if tc.driver != "" {
				driver = tc.driver
			}
			got, err := p.Matches(context.Background(), Device{Driver: driver, View: views[dev]})
			if tc.wantErr != "" {
				var ee *EvalError
				if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Matches error = %v, want *EvalError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Matches: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatchesNilDevice(t *testing.T) {
	p, err := NewCompiler().Compile(`true`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Matches(context.Background(), Device{}); err == nil || !strings.Contains(err.Error(), "no device") {
		t.Fatalf("Matches on empty view: err = %v, want error about the missing device", err)
	}
}

func TestRuntimeCostLimit(t *testing.T) {
	c := NewCompiler()
	c.runtimeCostLimit = 10
	p, err := c.Compile(`device.attributes["gpu.nvidia.com"].all(k, k.size() > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Matches(context.Background(), Device{Driver: gpuDriver, View: fixture(t)["gpu-0"]})
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("err = %v, want the runtime cost limit to be exceeded", err)
	}
}

func TestCancelledContext(t *testing.T) {
	p, err := NewCompiler().Compile(`lists.range(5000).all(i, i >= 0)`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("allocation deadline")
	cancel(cause)
	_, err = p.Matches(ctx, Device{Driver: gpuDriver, View: fixture(t)["gpu-0"]})
	if !errors.Is(err, cause) {
		t.Fatalf("err = %v, want it to wrap the context's cause", err)
	}
}
