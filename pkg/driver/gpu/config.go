package gpu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dractl/dractl/pkg/driver/prepare"
)

// APIVersion and Kind of the configuration.
const (
	APIVersion = "gpu.dractl.dev/v1alpha1"
	Kind       = "GpuConfig"
)

// GpuConfig configures the GPUs and MIG devices it applies to.
type GpuConfig struct {
	metav1.TypeMeta `json:",inline"`
	// ComputeInstanceProfile is the compute instance created in a MIG
	// device's GPU instance, as nvidia-smi names them: "<n>c.<GPU
	// instance profile>" (1c.3g.20gb: one of the three compute slices of
	// a 3g.20gb), or "<n>c" for any GPU instance. Unset, the compute
	// instance spans the GPU instance. MIG devices only (NVML backend).
	ComputeInstanceProfile string `json:"computeInstanceProfile,omitempty"`
	// TimeSlicing sets how long the processes sharing a GPU run in turn.
	TimeSlicing *TimeSlicing `json:"timeSlicing,omitempty"`
}

// TimeSlicing is the time-slice of processes sharing a GPU.
type TimeSlicing struct {
	// Interval is one of Intervals. The container gets it as
	// DRACTL_GPU_<DEVICE>_TIMESLICE_INTERVAL.
	Interval string `json:"interval"`
}

// Intervals are the time-slices the GPU knows, as nvidia-smi
// compute-policy --set-timeslice names them.
var Intervals = []string{"Default", "Short", "Medium", "Long"}

var ciProfile = regexp.MustCompile(`^([1-8])c(?:\.(\d+g\.\d+gb(?:\+[a-z]+)*))?$`)

// Decode reads one configuration strictly: the apiVersion and kind must be
// this package's, every field known and every value valid.
func Decode(parameters runtime.RawExtension) (*GpuConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(parameters.Raw))
	dec.DisallowUnknownFields()
	var c GpuConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a %s %s: %v", APIVersion, Kind, err)
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: expected apiVersion %q, kind %q", c.APIVersion, c.Kind, APIVersion, Kind)
	}
	if p := c.ComputeInstanceProfile; p != "" && !ciProfile.MatchString(p) {
		return nil, fmt.Errorf("computeInstanceProfile: invalid value %q: expected <slices>c or <slices>c.<GPU instance profile>, e.g. 1c or 1c.3g.20gb", p)
	}
	if c.TimeSlicing != nil && !slices.Contains(Intervals, c.TimeSlicing.Interval) {
		return nil, fmt.Errorf("timeSlicing.interval: unsupported value %q: expected one of %s", c.TimeSlicing.Interval, strings.Join(Intervals, ", "))
	}
	return &c, nil
}

// DecodeConfig is Decode as prepare.ConfigProfile wants it.
func DecodeConfig(parameters runtime.RawExtension) (any, error) {
	return Decode(parameters)
}

// Effective merges the configurations that apply to a device, in the
// kit's order (class, then claim): a later field overrides an earlier one.
func Effective(dev prepare.AllocatedDevice) GpuConfig {
	var out GpuConfig
	for _, c := range dev.Configs {
		g, ok := c.Decoded.(*GpuConfig)
		if !ok {
			continue // not decoded by this package: never handed to it
		}
		if g.ComputeInstanceProfile != "" {
			out.ComputeInstanceProfile = g.ComputeInstanceProfile
		}
		if g.TimeSlicing != nil {
			out.TimeSlicing = g.TimeSlicing
		}
	}
	return out
}

// ComputeSlices splits ComputeInstanceProfile into its compute slices and
// GPU instance profile ("" when it names none); 0 when unset.
func (c GpuConfig) ComputeSlices() (slices uint32, giProfile string) {
	m := ciProfile.FindStringSubmatch(c.ComputeInstanceProfile)
	if m == nil {
		return 0, ""
	}
	n, _ := strconv.Atoi(m[1])
	return uint32(n), m[2]
}

// Env is what the configuration adds to a container's environment, with
// the device's variable prefix.
func (c GpuConfig) Env(prefix string) []string {
	var out []string
	if c.TimeSlicing != nil {
		out = append(out, prefix+"TIMESLICE_INTERVAL="+c.TimeSlicing.Interval)
	}
	return out
}
