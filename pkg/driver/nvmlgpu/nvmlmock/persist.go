package nvmlmock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/dractl/dractl/pkg/driver/prepare"
)

// A GPU keeps its MIG instances when the driver that made them dies; a
// mock in the driver's process would lose them, and a crash test would
// then prove nothing. So a server made by Open keeps its instances in a
// file, rewritten before every create or destroy returns, and Open
// restores them. The file says only what NVML would report after a
// restart: per GPU, GPU instances (ID, profile, placement) and their
// compute instances (ID, profile, MIG UUID).

// instancesFile is the file's content.
type instancesFile struct {
	Version int    `json:"version"`
	Server  string `json:"server"`
	// Created counts the compute instances ever made, so that new MIG
	// UUIDs after a restore differ from every earlier one.
	Created int                `json:"created"`
	GPUs    []gpuInstancesFile `json:"gpus,omitempty"`
}

type gpuInstancesFile struct {
	Index        int                `json:"index"`
	GpuInstances []gpuInstanceEntry `json:"gpuInstances"`
}

type gpuInstanceEntry struct {
	ID               uint32                 `json:"id"`
	ProfileID        uint32                 `json:"profileID"`
	Start            uint32                 `json:"start"`
	Size             uint32                 `json:"size"`
	ComputeInstances []computeInstanceEntry `json:"computeInstances,omitempty"`
}

type computeInstanceEntry struct {
	ID        uint32 `json:"id"`
	ProfileID uint32 `json:"profileID"`
	UUID      string `json:"uuid"`
}

const instancesFileVersion = 1

// Open is New with the instances kept in the file at path: those it
// records are restored, with their IDs, placements and MIG UUIDs, and
// every later create and destroy is written there before it returns. A
// missing file is a server without instances.
func Open(name, path string, migOff ...int) (*Server, error) {
	m, err := New(name, migOff...)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var f instancesFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := m.restore(f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	// Set last: restoring must not rewrite the file it reads.
	m.path = path
	return m, nil
}

// restore recreates the recorded instances through the same checks as
// NVML calls, so a file that no GPU could hold is refused, not believed.
func (m *Server) restore(f instancesFile) error {
	if f.Version != instancesFileVersion {
		return fmt.Errorf("version: expected %d, found %d", instancesFileVersion, f.Version)
	}
	if f.Server != m.name {
		return fmt.Errorf("server: expected %q, found %q", m.name, f.Server)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, g := range f.GPUs {
		if g.Index < 0 || g.Index >= len(m.Devices) {
			return fmt.Errorf("gpus[%d].index: expected 0 to %d, found %d", i, len(m.Devices)-1, g.Index)
		}
		d := m.Device(g.Index)
		for j, e := range g.GpuInstances {
			field := fmt.Sprintf("gpus[%d].gpuInstances[%d]", i, j)
			info, ok := d.Config.MIGProfiles.GpuInstanceProfiles[int(e.ProfileID)]
			if !ok {
				return fmt.Errorf("%s.profileID: no GPU instance profile %d on GPU %d", field, e.ProfileID, g.Index)
			}
			gi, ret := m.createGpuInstance(d, &info, &nvml.GpuInstancePlacement{Start: e.Start, Size: e.Size}, &e.ID)
			if ret != nvml.SUCCESS {
				return fmt.Errorf("%s: GPU instance %d of profile %d at %d+%d: %v", field, e.ID, e.ProfileID, e.Start, e.Size, ret)
			}
			for k, c := range e.ComputeInstances {
				ciInfo, ret := gi.GetComputeInstanceProfileInfo(int(c.ProfileID), nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				if ret != nvml.SUCCESS {
					return fmt.Errorf("%s.computeInstances[%d].profileID: no compute instance profile %d: %v", field, k, c.ProfileID, ret)
				}
				if c.UUID == "" {
					return fmt.Errorf("%s.computeInstances[%d].uuid: expected a MIG UUID, found none", field, k)
				}
				if _, ret := m.createComputeInstance(gi, &ciInfo, &c.ID, c.UUID); ret != nvml.SUCCESS {
					return fmt.Errorf("%s.computeInstances[%d]: compute instance %d of profile %d: %v", field, k, c.ID, c.ProfileID, ret)
				}
			}
		}
	}
	m.created = f.Created
	return nil
}

// save writes the instances to m.path, leaving out gone (the
// *server.GpuInstance or *server.ComputeInstance about to be destroyed).
// Callers hold m.mu.
func (m *Server) save(gone any) error {
	if m.path == "" {
		return nil
	}
	f := instancesFile{Version: instancesFileVersion, Server: m.name, Created: m.created}
	for i := range m.Devices {
		g := gpuInstancesFile{Index: i}
		for _, gi := range gpuInstances(m.Device(i)) {
			if gi == gone {
				continue
			}
			e := gpuInstanceEntry{ID: gi.Info.Id, ProfileID: gi.Info.ProfileId, Start: gi.Info.Placement.Start, Size: gi.Info.Placement.Size}
			for _, ci := range computeInstances(gi) {
				if ci == gone {
					continue
				}
				e.ComputeInstances = append(e.ComputeInstances, computeInstanceEntry{ID: ci.Info.Id, ProfileID: ci.Info.ProfileId, UUID: m.migUUIDs[ci]})
			}
			g.GpuInstances = append(g.GpuInstances, e)
		}
		if len(g.GpuInstances) > 0 {
			f.GPUs = append(f.GPUs, g)
		}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return prepare.WriteFileAtomic(m.path, data)
}

// Failpoint names a change of instances, right after it is recorded.
// Crash tests kill the driver there: between the NVML calls of one
// partition, which driverkit's failpoints do not split.
type Failpoint string

const (
	AfterGpuInstanceCreated       Failpoint = "gpu-instance-created"
	AfterComputeInstanceCreated   Failpoint = "compute-instance-created"
	AfterComputeInstanceDestroyed Failpoint = "compute-instance-destroyed"
	AfterGpuInstanceDestroyed     Failpoint = "gpu-instance-destroyed"
)

// Failpoints lists the failpoints, creates first.
var Failpoints = []Failpoint{AfterGpuInstanceCreated, AfterComputeInstanceCreated, AfterComputeInstanceDestroyed, AfterGpuInstanceDestroyed}

// KillAt makes the process die of SIGKILL, as prepare.KillAt does, the
// first time the server reaches the named failpoint; "" is none.
func (m *Server) KillAt(name string) error {
	if name != "" && !slices.Contains(Failpoints, Failpoint(name)) {
		return fmt.Errorf("unknown mock NVML failpoint %q; known: %v", name, Failpoints)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failpoint = Failpoint(name)
	return nil
}

// reached kills the process at its failpoint. Callers hold m.mu.
func (m *Server) reached(f Failpoint) {
	if m.failpoint != "" && f == m.failpoint {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; do not take another step
	}
}
