package monitor

// The monitor's Event reasons, its one table of them. They are part of
// its interface: alerts and `kubectl events --for` filters use them.
const (
	// ReasonPoolInvalid (Warning): a complete pool breaks a rule spanning
	// its slices; the scheduler will not allocate from any of it.
	ReasonPoolInvalid = "PoolInvalid"
	// ReasonPoolIncomplete (Warning): the pool has had fewer (or more)
	// slices than its resourceSliceCount for longer than the grace period;
	// the scheduler skips it.
	ReasonPoolIncomplete = "PoolIncomplete"
	// ReasonPoolRecovered (Normal): a pool reported before is complete and
	// valid again.
	ReasonPoolRecovered = "PoolRecovered"
	// ReasonPoolGenerationRegressed (Warning): a slice of the pool was
	// updated to an older generation than it had. Reported once per pool
	// while the monitor sees the pool, however often it happens.
	ReasonPoolGenerationRegressed = "PoolGenerationRegressed"

	// Device taints (KEP-5055). A driver taints a device it knows is
	// broken (dractl's driver kit: dractl.dev/unhealthy), an administrator
	// taints one through a DeviceTaintRule or the slice; either way the
	// scheduler no longer allocates it to claims that do not tolerate the
	// taint, which an operator looking at the slice or the node should see.

	// ReasonDeviceTainted (Warning): devices of the slice have a
	// NoSchedule or NoExecute taint they did not have; one Event per
	// slice and taint, naming the devices.
	ReasonDeviceTainted = "DeviceTainted"
	// ReasonDeviceUntainted (Normal): devices reported tainted have lost
	// that taint.
	ReasonDeviceUntainted = "DeviceUntainted"
)
