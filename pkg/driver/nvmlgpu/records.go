package nvmlgpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/driver/prepare"
)

// instance is the record of one partition the driver made: a MIG device
// (GPU instance and its compute instance) or a whole GPU handed out.
// NVML cannot label an instance, so this record is how the driver tells
// its instances from those someone else made, which it never touches.
type instance struct {
	GPUUUID string    `json:"gpuUUID"`
	Pool    string    `json:"pool"`
	Device  string    `json:"device"`
	Claim   types.UID `json:"claim"`
	// Whole is a whole GPU: nothing is created on it.
	Whole bool `json:"whole,omitempty"`
	// Profile, ProfileID (NVML's), Start and Size say what is created.
	Profile   string `json:"profile,omitempty"`
	ProfileID uint32 `json:"profileID,omitempty"`
	Start     uint32 `json:"start,omitempty"`
	Size      uint32 `json:"size,omitempty"`
	// ComputeSlices is the configured compute instance's; 0 when it
	// spans the GPU instance.
	ComputeSlices uint32 `json:"computeSlices,omitempty"`
	// GI and CI are set once NVML created them. A record without GI was
	// written before the create call: if the driver stopped after it, the
	// GPU instance at exactly this profile and placement is the driver's,
	// since NVML refuses a second one there.
	GI *uint32 `json:"gpuInstance,omitempty"`
	CI *uint32 `json:"computeInstance,omitempty"`
	// UUID is the MIG device's (or the whole GPU's).
	UUID string `json:"uuid,omitempty"`
	// CapMinors are the minors of the GPU instance's and the compute
	// instance's capability device nodes under /dev/nvidia-caps.
	CapMinors []int `json:"capMinors,omitempty"`
}

func (in *instance) partition() prepare.Partition {
	id := in.UUID
	if id == "" {
		id = fmt.Sprintf("%s/%s@%d", in.GPUUUID, in.Profile, in.Start)
	}
	return prepare.Partition{ID: id, Pool: in.Pool, Device: in.Device, Claim: in.Claim}
}

// stateFile is the versioned file of the driver's instances.
type stateFile struct {
	Version   int         `json:"version"`
	Instances []*instance `json:"instances"`
}

const stateVersion = 1

// instanceRecords keeps the records of the instances the driver made in memory and on disk; callers serialize.
type instanceRecords struct {
	path      string
	instances []*instance
}

func loadState(path string) (*instanceRecords, error) {
	s := &instanceRecords{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != stateVersion {
		return nil, fmt.Errorf("%s: version %d, this driver reads version %d", path, f.Version, stateVersion)
	}
	s.instances = f.Instances
	return s, nil
}

func (s *instanceRecords) save() error {
	data, err := json.MarshalIndent(stateFile{Version: stateVersion, Instances: s.instances}, "", "  ")
	if err != nil {
		return err
	}
	return prepare.WriteFileAtomic(s.path, data)
}

func (s *instanceRecords) find(claim types.UID, device string) *instance {
	for _, in := range s.instances {
		if in.Claim == claim && in.Device == device {
			return in
		}
	}
	return nil
}

func (s *instanceRecords) add(in *instance) error {
	s.instances = append(s.instances, in)
	return s.save()
}

func (s *instanceRecords) remove(in *instance) error {
	s.instances = slices.DeleteFunc(s.instances, func(x *instance) bool { return x == in })
	return s.save()
}

func (s *instanceRecords) onGPU(uuid string) []*instance {
	var out []*instance
	for _, in := range s.instances {
		if in.GPUUUID == uuid {
			out = append(out, in)
		}
	}
	return out
}
