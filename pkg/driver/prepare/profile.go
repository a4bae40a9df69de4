package prepare

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// AllocatedDevice is one device of this driver in a claim's allocation.
type AllocatedDevice struct {
	// Request is the request (or request/subrequest) the device serves.
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// AdminAccess and ShareID come from the allocation result. Devices
	// with either are not exclusive to the claim.
	AdminAccess bool       `json:"adminAccess,omitempty"`
	ShareID     *types.UID `json:"shareID,omitempty"`
	// Configs are the opaque configurations of this driver that apply to
	// the device, lowest precedence first: its class's, then the claim's
	// (see ConfigProfile). Empty unless the Profile is a ConfigProfile.
	Configs []DeviceConfig `json:"configs,omitempty"`
}

func (d AllocatedDevice) exclusive() bool { return !d.AdminAccess && d.ShareID == nil }

// Partition is what a Profile created on the hardware for one allocated
// device: a MIG instance, a TPU sub-slice, a virtual function.
type Partition struct {
	// ID names the partition on the hardware, e.g. a MIG device UUID.
	ID string `json:"id"`
	// Pool and Device are the published device it was created for.
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// Claim is the claim it was created for, when the hardware can
	// remember it; empty otherwise. Reconciliation keeps a partition only
	// if a completed claim holds its device (and, if set, has this UID).
	Claim types.UID `json:"claim,omitempty"`
}

// Profile is the hardware-specific part of a driver. The kit calls it
// under its own bookkeeping: CreatePartition only for a device no other
// claim holds and whose counters are free, DestroyPartition only for a
// partition no completed claim owns. Methods may be called concurrently
// for different devices.
type Profile interface {
	// CreatePartition creates the partition of dev for claim. The kit
	// records the result before it goes on, so a partition created but
	// not returned (a crash in between) is found by Partitions at the
	// next start and destroyed.
	CreatePartition(ctx context.Context, claim types.UID, dev AllocatedDevice) (Partition, error)
	// DestroyPartition destroys p; a partition that no longer exists is
	// not an error.
	DestroyPartition(ctx context.Context, p Partition) error
	// Partitions lists the partitions that exist now.
	Partitions(ctx context.Context) ([]Partition, error)
	// ContainerEdits is what a container using dev gets: environment,
	// device nodes, mounts. The kit adds nothing hardware-specific.
	ContainerEdits(claim types.UID, dev AllocatedDevice, p Partition) cdispec.ContainerEdits
}

// DeviceKey names a published device.
type DeviceKey struct {
	Pool, Device string
}

func (k DeviceKey) String() string { return k.Pool + "/" + k.Device }
