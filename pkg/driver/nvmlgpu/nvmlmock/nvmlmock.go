// Package nvmlmock runs the NVML backend of dractl-gpu-driver on NVIDIA's
// own mock DGX servers (github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgx*).
// Those servers hold GPU and compute instances with each GPU's real
// profile tables, but leave out behaviour of the hardware that a driver
// relies on. This package adds exactly that, on NVIDIA's objects:
//
//   - a GPU instance is refused with ERROR_INSUFFICIENT_RESOURCES when its
//     memory slices overlap an existing instance or the GPU's engines are
//     used up, and with ERROR_INVALID_ARGUMENT at a placement its profile
//     does not have; the mock creates anything;
//   - a GPU instance with compute instances cannot be destroyed
//     (ERROR_IN_USE);
//   - instance IDs are reused lowest first, so they stay within the range
//     the driver's capability device nodes cover;
//   - GetGpuInstanceById, GetComputeInstanceById and MIG device handles
//     (GetMaxMigDeviceCount, GetMigDeviceHandleByIndex, a MIG UUID);
//   - event sets, with XID errors injected by InjectXID;
//   - stable GPU UUIDs, so that a restarted driver publishes the same pool;
//   - instances that outlive the process, as they outlive a driver on a
//     real GPU: a server made by Open records them in a file (see
//     persist.go), so a test can kill the driver and find them again.
//
// It is a test double for tests and for the driver's test-only
// --nvml-mock flag, never for production.
package nvmlmock

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/dractl/dractl/pkg/driver/prepare"
)

// Servers are the mock servers by name.
var Servers = map[string]func() *server.Server{
	"dgxa100": dgxa100.New,
	"dgxh100": dgxh100.New,
	"dgxh200": dgxh200.New,
	"dgxb200": dgxb200.New,
}

// ServerNames lists Servers' names, sorted.
func ServerNames() []string {
	var out []string
	for n := range Servers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Hardware limits of MIG: GPU instance IDs per GPU and compute instance
// IDs per GPU instance that the capability device nodes cover.
const (
	maxGpuInstances     = 15
	maxComputeInstances = 8
)

// Server is a mock DGX server that behaves as the hardware does where a
// driver depends on it.
type Server struct {
	*server.Server
	name string

	// mu serializes every change of instances and guards the maps below,
	// as the driver's own lock does on a real GPU.
	mu       sync.Mutex
	migUUIDs map[*server.ComputeInstance]string
	handles  map[*server.ComputeInstance]*mock.Device
	sets     map[*eventSet]map[*server.Device]uint64
	created  int
	// path is the file Open keeps the instances in; empty keeps them
	// in memory only.
	path string
	// failpoint is where KillAt kills the process.
	failpoint Failpoint
}

// New builds the named server (see Servers) with MIG mode on for every GPU
// except those listed in migOff.
func New(name string, migOff ...int) (*Server, error) {
	build, ok := Servers[name]
	if !ok {
		return nil, fmt.Errorf("unknown mock NVML server %q; known: %s", name, strings.Join(ServerNames(), ", "))
	}
	return Wrap(name, build(), migOff...), nil
}

// Wrap adds the hardware's behaviour to s. name seeds the GPU UUIDs.
func Wrap(name string, s *server.Server, migOff ...int) *Server {
	m := &Server{
		Server: s, name: name,
		migUUIDs: map[*server.ComputeInstance]string{},
		handles:  map[*server.ComputeInstance]*mock.Device{},
		sets:     map[*eventSet]map[*server.Device]uint64{},
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.UUID = "GPU-" + m.uuid("gpu", i)
		dev.MigMode = 1
		if slices.Contains(migOff, i) {
			dev.MigMode = 0
		}
		m.wrapDevice(dev)
	}
	s.EventSetCreateFunc = m.eventSetCreate
	return m
}

func (m *Server) uuid(parts ...any) string {
	h := sha256.Sum256(fmt.Append(nil, append([]any{m.name}, parts...)...))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Device returns the mock GPU of an index.
func (m *Server) Device(i int) *server.Device { return m.Devices[i].(*server.Device) }

func (m *Server) wrapDevice(d *server.Device) {
	d.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		gi, ret := m.createGpuInstance(d, info, placement, nil)
		if ret != nvml.SUCCESS {
			return nil, ret // not a typed nil in the interface
		}
		return gi, ret
	}
	d.CreateGpuInstanceFunc = func(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range d.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
			if gi, ret := m.createGpuInstance(d, info, &p, nil); ret == nvml.SUCCESS {
				return gi, ret
			}
		}
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	d.GetGpuInstancesFunc = func(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var out []nvml.GpuInstance
		for _, gi := range gpuInstances(d) {
			if gi.Info.ProfileId == info.Id {
				out = append(out, gi)
			}
		}
		return out, nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, gi := range gpuInstances(d) {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var all []*server.ComputeInstance
		for _, gi := range gpuInstances(d) {
			all = append(all, computeInstances(gi)...)
		}
		if i < 0 || i >= len(all) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return m.handles[all[i]], nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		es, ok := set.(*eventSet)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.sets[es] == nil {
			return nvml.ERROR_UNINITIALIZED
		}
		m.sets[es][d] |= types
		return nvml.SUCCESS
	}
}

// gpuInstances lists d's GPU instances by ID. Callers hold m.mu.
func gpuInstances(d *server.Device) []*server.GpuInstance {
	d.RLock()
	defer d.RUnlock()
	out := make([]*server.GpuInstance, 0, len(d.GpuInstances))
	for gi := range d.GpuInstances {
		out = append(out, gi)
	}
	slices.SortFunc(out, func(a, b *server.GpuInstance) int { return int(a.Info.Id) - int(b.Info.Id) })
	return out
}

func computeInstances(gi *server.GpuInstance) []*server.ComputeInstance {
	gi.RLock()
	defer gi.RUnlock()
	out := make([]*server.ComputeInstance, 0, len(gi.ComputeInstances))
	for ci := range gi.ComputeInstances {
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b *server.ComputeInstance) int { return int(a.Info.Id) - int(b.Info.Id) })
	return out
}

// createGpuInstance is the hardware's check and NVIDIA's mock instance,
// recorded in m.path. The ID is the lowest free one, or id when restoring
// a recorded instance. Callers hold m.mu.
func (m *Server) createGpuInstance(d *server.Device, info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement, id *uint32) (*server.GpuInstance, nvml.Return) {
	if mode, _, _ := d.GetMigMode(); mode != nvml.DEVICE_MIG_ENABLE {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	profiles := d.Config.MIGProfiles
	profile, ok := profiles.GpuInstanceProfiles[int(info.Id)]
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	if !slices.Contains(profiles.GpuInstancePlacements[int(info.Id)], *placement) {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	existing := gpuInstances(d)
	used := resources(profile)
	for _, gi := range existing {
		p := gi.Info.Placement
		if p.Start < placement.Start+placement.Size && placement.Start < p.Start+p.Size {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		used = used.plus(resources(profiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]))
	}
	if !used.within(resources(fullProfile(profiles.GpuInstanceProfiles))) {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	taken := func(id uint32) bool {
		return slices.ContainsFunc(existing, func(gi *server.GpuInstance) bool { return gi.Info.Id == id })
	}
	giID, ok := lowestFree(maxGpuInstances, taken)
	if id != nil {
		giID, ok = *id, *id < maxGpuInstances && !taken(*id)
	}
	if !ok {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	gi := server.NewGpuInstanceFromInfo(nvml.GpuInstanceInfo{Device: d, Id: giID, ProfileId: info.Id, Placement: *placement}, profiles)
	m.wrapGpuInstance(gi)
	d.Lock()
	d.GpuInstances[gi] = struct{}{}
	d.Unlock()
	if err := m.save(nil); err != nil {
		d.Lock()
		delete(d.GpuInstances, gi)
		d.Unlock()
		return nil, nvml.ERROR_UNKNOWN
	}
	m.reached(AfterGpuInstanceCreated)
	return gi, nvml.SUCCESS
}

// createComputeInstance is the hardware's check and NVIDIA's mock
// instance, recorded in m.path. The ID is the lowest free one, or id with
// its MIG UUID when restoring a recorded instance. Callers hold m.mu.
func (m *Server) createComputeInstance(gi *server.GpuInstance, info *nvml.ComputeInstanceProfileInfo, id *uint32, uuid string) (*server.ComputeInstance, nvml.Return) {
	if _, ret := gi.GetComputeInstanceProfileInfo(int(info.Id), nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED); ret != nvml.SUCCESS {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	existing := computeInstances(gi)
	used := uint32(0)
	for _, ci := range existing {
		used += gi.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)].SliceCount
	}
	if used+info.SliceCount > gi.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)].SliceCount {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	taken := func(id uint32) bool {
		return slices.ContainsFunc(existing, func(ci *server.ComputeInstance) bool { return ci.Info.Id == id })
	}
	ciID, ok := lowestFree(maxComputeInstances, taken)
	if id != nil {
		ciID, ok = *id, *id < maxComputeInstances && !taken(*id)
	}
	if !ok {
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	ci := server.NewComputeInstanceFromInfo(nvml.ComputeInstanceInfo{Device: gi.Info.Device, GpuInstance: gi, Id: ciID, ProfileId: info.Id})
	m.wrapComputeInstance(gi, ci, uuid)
	gi.Lock()
	gi.ComputeInstances[ci] = struct{}{}
	gi.Unlock()
	if err := m.save(nil); err != nil {
		gi.Lock()
		delete(gi.ComputeInstances, ci)
		gi.Unlock()
		delete(m.migUUIDs, ci)
		delete(m.handles, ci)
		return nil, nvml.ERROR_UNKNOWN
	}
	m.reached(AfterComputeInstanceCreated)
	return ci, nvml.SUCCESS
}

func (m *Server) wrapGpuInstance(gi *server.GpuInstance) {
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		ci, ret := m.createComputeInstance(gi, info, nil, "")
		if ret != nvml.SUCCESS {
			return nil, ret // not a typed nil in the interface
		}
		return ci, ret
	}
	gi.GetComputeInstancesFunc = func(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var out []nvml.ComputeInstance
		for _, ci := range computeInstances(gi) {
			if ci.Info.ProfileId == info.Id {
				out = append(out, ci)
			}
		}
		return out, nvml.SUCCESS
	}
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, ci := range computeInstances(gi) {
			if int(ci.Info.Id) == id {
				return ci, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	destroy := gi.DestroyFunc
	gi.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(computeInstances(gi)) > 0 {
			return nvml.ERROR_IN_USE
		}
		d := gi.Info.Device.(*server.Device)
		d.RLock()
		_, exists := d.GpuInstances[gi]
		d.RUnlock()
		if !exists {
			return nvml.ERROR_NOT_FOUND
		}
		// Recorded first: a failed write leaves the instance, as a
		// failed destroy does.
		if err := m.save(gi); err != nil {
			return nvml.ERROR_UNKNOWN
		}
		ret := destroy()
		m.reached(AfterGpuInstanceDestroyed)
		return ret
	}
}

// wrapComputeInstance gives ci its MIG device: uuid, or a new UUID when
// empty. Callers hold m.mu.
func (m *Server) wrapComputeInstance(gi *server.GpuInstance, ci *server.ComputeInstance, uuid string) {
	parent := gi.Info.Device.(*server.Device)
	if uuid == "" {
		m.created++
		uuid = "MIG-" + m.uuid("mig", parent.UUID, m.created)
	}
	m.migUUIDs[ci] = uuid
	h := &mock.Device{}
	h.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	h.GetUUIDFunc = func() (string, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if u, ok := m.migUUIDs[ci]; ok {
			return u, nvml.SUCCESS
		}
		return "", nvml.ERROR_NOT_FOUND
	}
	h.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS }
	h.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS }
	h.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	m.handles[ci] = h
	destroy := ci.DestroyFunc
	ci.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.migUUIDs[ci]; !ok {
			return nvml.ERROR_NOT_FOUND
		}
		if err := m.save(ci); err != nil {
			return nvml.ERROR_UNKNOWN
		}
		delete(m.migUUIDs, ci)
		delete(m.handles, ci)
		ret := destroy()
		m.reached(AfterComputeInstanceDestroyed)
		return ret
	}
}

func lowestFree(limit uint32, used func(uint32) bool) (uint32, bool) {
	for id := range limit {
		if !used(id) {
			return id, true
		}
	}
	return 0, false
}

// engines are what GPU instances of one GPU share besides memory slices.
type engines struct{ sm, ce, dec, enc, jpeg, ofa uint32 }

func resources(p nvml.GpuInstanceProfileInfo) engines {
	return engines{p.MultiprocessorCount, p.CopyEngineCount, p.DecoderCount, p.EncoderCount, p.JpegCount, p.OfaCount}
}

func (e engines) plus(o engines) engines {
	return engines{e.sm + o.sm, e.ce + o.ce, e.dec + o.dec, e.enc + o.enc, e.jpeg + o.jpeg, e.ofa + o.ofa}
}

func (e engines) within(o engines) bool {
	return e.sm <= o.sm && e.ce <= o.ce && e.dec <= o.dec && e.enc <= o.enc && e.jpeg <= o.jpeg && e.ofa <= o.ofa
}

// fullProfile is the profile of the whole GPU: the most slices.
func fullProfile(ps map[int]nvml.GpuInstanceProfileInfo) nvml.GpuInstanceProfileInfo {
	var full nvml.GpuInstanceProfileInfo
	for _, p := range ps {
		if p.SliceCount > full.SliceCount || p.SliceCount == full.SliceCount && p.MultiprocessorCount > full.MultiprocessorCount {
			full = p
		}
	}
	return full
}

// eventSet is an NVML event set fed by InjectXID.
type eventSet struct {
	mock.EventSet
	events chan nvml.EventData
}

func (m *Server) eventSetCreate() (nvml.EventSet, nvml.Return) {
	es := &eventSet{events: make(chan nvml.EventData, 64)}
	es.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		t := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
		defer t.Stop()
		select {
		case e := <-es.events:
			return e, nvml.SUCCESS
		case <-t.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	es.FreeFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.sets, es)
		return nvml.SUCCESS
	}
	m.mu.Lock()
	m.sets[es] = map[*server.Device]uint64{}
	m.mu.Unlock()
	return es, nvml.SUCCESS
}

// InjectXID delivers an XID critical error of GPU gpu to every event set
// registered for it, as the driver reports a fault.
func (m *Server) InjectXID(gpu int, xid uint64) error {
	if gpu < 0 || gpu >= len(m.Devices) {
		return fmt.Errorf("no GPU %d: the server has %d", gpu, len(m.Devices))
	}
	d := m.Device(gpu)
	m.mu.Lock()
	defer m.mu.Unlock()
	for es, devs := range m.sets {
		if devs[d]&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		select {
		case es.events <- nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: xid, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}:
		default:
			return fmt.Errorf("event set of GPU %d is full", gpu)
		}
	}
	return nil
}

// Device node numbers of the mock's kernel driver: NVIDIA's major for
// the control node (minor 255) and the GPUs (minor = the GPU's minor),
// and majors for UVM and the MIG capabilities, which a real host assigns
// dynamically.
const (
	NvidiaMajor = 195
	UVMMajor    = 510
	CapsMajor   = 511
)

// WriteDeviceNodes makes, under dir, the device nodes NVIDIA's kernel
// driver makes under /dev for this server: nvidiactl, nvidia-uvm,
// nvidia-uvm-tools, nvidia<minor> for every GPU and
// nvidia-caps/nvidia-cap<minor> for every minor of WriteMigMinors' table,
// as character devices (it takes CAP_MKNOD). A container runtime reads
// their numbers when a CDI spec names them by host path. Nodes already
// there with the right numbers stay.
func (m *Server) WriteDeviceNodes(dir string) error {
	nodes := map[string][2]uint32{
		"nvidiactl": {NvidiaMajor, 255}, "nvidia-uvm": {UVMMajor, 0}, "nvidia-uvm-tools": {UVMMajor, 1},
		"nvidia-caps/nvidia-cap1": {CapsMajor, 1}, "nvidia-caps/nvidia-cap2": {CapsMajor, 2},
	}
	minor := uint32(3)
	for i := range len(m.Devices) {
		gpuMinor, ret := m.Device(i).GetMinorNumber()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("mock GPU %d: minor number: %v", i, ret)
		}
		nodes[fmt.Sprintf("nvidia%d", gpuMinor)] = [2]uint32{NvidiaMajor, uint32(gpuMinor)}
		for range maxGpuInstances * (1 + maxComputeInstances) {
			nodes[fmt.Sprintf("nvidia-caps/nvidia-cap%d", minor)] = [2]uint32{CapsMajor, minor}
			minor++
		}
	}
	for name, num := range nodes {
		if err := prepare.MakeCharDevice(filepath.Join(dir, name), num[0], num[1]); err != nil {
			return fmt.Errorf("mock NVIDIA driver: %w", err)
		}
	}
	return nil
}

// WriteMigMinors writes, at path, the table NVIDIA's kernel driver
// publishes at /proc/driver/nvidia-caps/mig-minors: the minor of the
// capability device node of every GPU instance and compute instance
// slot of every GPU, by GPU minor.
func (m *Server) WriteMigMinors(path string) error {
	var b strings.Builder
	b.WriteString("config 1\nmonitor 2\n")
	minor := 3
	for gpu := range len(m.Devices) {
		for gi := range maxGpuInstances {
			fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", gpu, gi, minor)
			minor++
			for ci := range maxComputeInstances {
				fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", gpu, gi, ci, minor)
				minor++
			}
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
