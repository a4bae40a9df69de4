package prepare

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// ConfigProfile is a Profile that takes opaque device configuration: the
// DeviceClass's spec.config and the claim's spec.devices.config, which the
// scheduler copies into the claim's status.allocation.devices.config. The
// kit resolves which configurations apply to each allocated device (see
// DeviceConfig) and decodes each once with DecodeConfig; the results reach
// CreatePartition and ContainerEdits as AllocatedDevice.Configs.
//
// A Profile without this interface takes no configuration: a claim that
// carries some for the driver is refused rather than prepared as if it
// carried none.
type ConfigProfile interface {
	Profile
	// DecodeConfig turns the parameters of one configuration for this
	// driver into the Profile's own value, checking them (fields, values,
	// kind and version). An error refuses the claim's prepare; it should
	// say which field is wrong and what was expected. The kit decodes
	// again after a restart, from the parameters it checkpointed.
	DecodeConfig(parameters runtime.RawExtension) (any, error)
}

// DeviceConfig is one opaque configuration that applies to an allocated
// device.
type DeviceConfig struct {
	// Source says where it came from: the device's class
	// (FromClass) or the claim (FromClaim).
	Source resourcev1.AllocationConfigSource `json:"source"`
	// Index is its position in status.allocation.devices.config.
	Index int `json:"index"`
	// Parameters are the opaque parameters as the API server stored them.
	Parameters runtime.RawExtension `json:"parameters"`
	// Decoded is what the Profile's DecodeConfig made of Parameters. It
	// is not checkpointed; the kit decodes again after a restart.
	Decoded any `json:"-"`
}

// RequestEditsProfile is a Profile whose containers need edits that
// depend on all the devices they get together: NVIDIA's container toolkit
// reads one NVIDIA_VISIBLE_DEVICES listing every GPU, and per-device edits
// of the same variable overwrite one another when a container gets two
// devices.
//
// A container gets the devices of the requests it names, or of every
// request of the claim (the kubelet strips subrequest names), so the kit
// asks for the edits of each top-level request's devices and writes them
// as one more CDI device, handed to the kubelet with the request's first
// device. A container given the devices of several requests of one claim
// gets each request's edits, applied in order: variables the requests
// share end with the last request's value.
type RequestEditsProfile interface {
	Profile
	// RequestEdits are the edits of a container that gets devices, the
	// prepared devices of one top-level request, in allocation order.
	RequestEdits(claim types.UID, request string, devices []PreparedDevice) cdispec.ContainerEdits
}

// baseRequest is the top-level request of a request or subrequest
// reference ("gpu/mig" → "gpu"), as the kubelet and
// resourceclaim.BaseRequestRef read it.
func baseRequest(ref string) string {
	base, _, _ := strings.Cut(ref, "/")
	return base
}

// configApplies reports whether a configuration naming requests applies
// to a device allocated for request (a request or subrequest reference).
// No requests means every request of the claim (KEP-4381 "Configuration");
// a configuration naming a request applies to each of its subrequests.
func configApplies(requests []string, request string) bool {
	return len(requests) == 0 || slices.Contains(requests, request) || slices.Contains(requests, baseRequest(request))
}

// ConfigError is a claim's configuration that the kit or the Profile
// refused; the claim is not prepared.
type ConfigError struct {
	Claim string // namespace/name
	// Request is the first of the claim's requests the configuration
	// applies to; Index its position in status.allocation.devices.config.
	Request string
	Index   int
	Source  resourcev1.AllocationConfigSource
	Err     error
}

func (e *ConfigError) Error() string {
	if e.Request == "" {
		return fmt.Sprintf("claim %s: status.allocation.devices.config[%d] (%s): %v", e.Claim, e.Index, e.Source, e.Err)
	}
	return fmt.Sprintf("claim %s, request %q: status.allocation.devices.config[%d] (%s): %v", e.Claim, e.Request, e.Index, e.Source, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// resolveConfigs sets each device's Configs: the configurations of this
// driver that apply to its request, those of its class before those of
// the claim and each in allocation order, so that a Profile merging them
// lets the claim's override the class's (the order upstream drivers apply
// them in). Each configuration is decoded once and shared by the devices
// it applies to.
func (k *Kit) resolveConfigs(claim *resourcev1.ResourceClaim, devices []PreparedDevice) error {
	all := claim.Status.Allocation.Devices.Config
	name := claim.Namespace + "/" + claim.Name
	order := make([]int, 0, len(all))
	for _, source := range []resourcev1.AllocationConfigSource{resourcev1.AllocationConfigSourceClass, resourcev1.AllocationConfigSourceClaim} {
		for i := range all {
			if all[i].Source == source {
				order = append(order, i)
			}
		}
	}
	for i, c := range all {
		if c.Source != resourcev1.AllocationConfigSourceClass && c.Source != resourcev1.AllocationConfigSourceClaim {
			return &ConfigError{Claim: name, Index: i, Source: c.Source, Err: fmt.Errorf("source %q: expected %s or %s",
				c.Source, resourcev1.AllocationConfigSourceClass, resourcev1.AllocationConfigSourceClaim)}
		}
	}
	cp, decodes := k.profile.(ConfigProfile)
	for _, i := range order {
		c := &all[i]
		var first *PreparedDevice
		for j := range devices {
			if configApplies(c.Requests, devices[j].Request) {
				first = &devices[j]
				break
			}
		}
		if first == nil {
			continue // for other drivers' requests only
		}
		fail := func(err error) error {
			return &ConfigError{Claim: name, Request: first.Request, Index: i, Source: c.Source, Err: err}
		}
		if c.Opaque == nil {
			// v1 has no other kind; a newer one is not understood here,
			// and ignoring it could leave a device configured wrongly.
			return fail(fmt.Errorf("opaque: required, this driver understands opaque configuration only"))
		}
		if c.Opaque.Driver != k.cfg.DriverName {
			continue // a request may be served by several drivers
		}
		if !decodes {
			return fail(fmt.Errorf("driver %s takes no configuration", k.cfg.DriverName))
		}
		v, err := cp.DecodeConfig(c.Opaque.Parameters)
		if err != nil {
			return fail(fmt.Errorf("opaque.parameters: %w", err))
		}
		for j := range devices {
			if configApplies(c.Requests, devices[j].Request) {
				devices[j].Configs = append(devices[j].Configs, DeviceConfig{
					Source: c.Source, Index: i, Parameters: *c.Opaque.Parameters.DeepCopy(), Decoded: v,
				})
			}
		}
	}
	return nil
}

// redecode restores the decoded configurations of a checkpointed claim.
func (k *Kit) redecode(rec *ClaimRecord) error {
	cp, ok := k.profile.(ConfigProfile)
	for i := range rec.Devices {
		d := &rec.Devices[i]
		for j := range d.Configs {
			c := &d.Configs[j]
			if !ok {
				return &ConfigError{Claim: rec.Namespace + "/" + rec.Name, Request: d.Request, Index: c.Index, Source: c.Source,
					Err: fmt.Errorf("driver %s takes no configuration", k.cfg.DriverName)}
			}
			v, err := cp.DecodeConfig(c.Parameters)
			if err != nil {
				return &ConfigError{Claim: rec.Namespace + "/" + rec.Name, Request: d.Request, Index: c.Index, Source: c.Source,
					Err: fmt.Errorf("opaque.parameters: %w", err)}
			}
			c.Decoded = v
		}
	}
	return nil
}

// requestGroups splits a claim's devices by top-level request, in order
// of first appearance: what one container may get together.
func requestGroups(devices []PreparedDevice) (names []string, groups [][]int) {
	for i, d := range devices {
		base := baseRequest(d.Request)
		j := slices.Index(names, base)
		if j < 0 {
			names, groups = append(names, base), append(groups, nil)
			j = len(names) - 1
		}
		groups[j] = append(groups[j], i)
	}
	return names, groups
}
