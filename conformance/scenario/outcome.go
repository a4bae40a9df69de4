package scenario

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
)

// Kind classifies the answer of an allocator for one node.
type Kind string

const (
	Fit     Kind = "fit"
	Unfit   Kind = "unfit"
	Fatal   Kind = "fatal"
	Timeout Kind = "timeout"
)

// Outcome is the answer of one allocator for one node.
type Outcome struct {
	Kind    Kind
	Results []*resourcev1.AllocationResult // Fit only, one per claim
	Err     error
}

func (o Outcome) String() string {
	switch o.Kind {
	case Fit:
		return "fit " + DescribeResults(o.Results)
	case Unfit, Fatal, Timeout:
		if o.Err != nil {
			msg := o.Err.Error()
			if len(msg) > 160 {
				msg = msg[:160] + "…"
			}
			return string(o.Kind) + " (" + msg + ")"
		}
	}
	return string(o.Kind)
}

// DescribeResults renders the chosen devices: claims separated by " | ",
// each device as request=pool/device.
func DescribeResults(rs []*resourcev1.AllocationResult) string {
	var parts []string
	for _, r := range rs {
		var ds []string
		if r != nil {
			for _, d := range r.Devices.Results {
				s := d.Request + "=" + d.Pool + "/" + d.Device
				if d.AdminAccess != nil && *d.AdminAccess {
					s += "(admin)"
				}
				ds = append(ds, s)
			}
		}
		parts = append(parts, "["+strings.Join(ds, ",")+"]")
	}
	return strings.Join(parts, " ")
}

// SameDevices reports whether two fits chose the same devices for the same
// requests in the same order (share IDs are random and ignored; consumed
// capacity is compared).
func SameDevices(a, b []*resourcev1.AllocationResult) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d vs %d results", len(a), len(b))
	}
	key := func(r resourcev1.DeviceRequestAllocationResult) string {
		s := r.Request + "=" + r.Driver + "/" + r.Pool + "/" + r.Device
		if r.AdminAccess != nil && *r.AdminAccess {
			s += "(admin)"
		}
		var caps []string
		for k, v := range r.ConsumedCapacity {
			caps = append(caps, string(k)+":"+v.String())
		}
		slices.Sort(caps)
		return s + strings.Join(caps, ",")
	}
	for i := range a {
		var ka, kb []string
		for _, r := range a[i].Devices.Results {
			ka = append(ka, key(r))
		}
		for _, r := range b[i].Devices.Results {
			kb = append(kb, key(r))
		}
		if !slices.Equal(ka, kb) {
			return false, fmt.Sprintf("claim %d: %v vs %v", i, ka, kb)
		}
	}
	return true, ""
}
