package nvmlgpu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// DefaultMigMinors is where NVIDIA's kernel driver lists the minors of the
// MIG capability device nodes.
const DefaultMigMinors = "/proc/driver/nvidia-caps/mig-minors"

// Options configure GPUs.
type Options struct {
	// Driver and Node name the driver and the node (the pool).
	Driver, Node string
	// StateDir keeps the record of the instances the driver created.
	StateDir string
	// MigMinors is the kernel driver's table of capability minors;
	// DefaultMigMinors when empty.
	MigMinors string
	// DevRoot is the host directory whose dev/ holds the device nodes
	// the CDI edits name ("/" when empty): the root NVIDIA's driver is
	// installed at, such as /run/nvidia/driver when a driver container
	// installs it. The runtime reads the nodes there; containers get
	// them under /dev.
	DevRoot string
	// Clock dates the notices of ignored XIDs; the real clock when nil.
	Clock clock.PassiveClock
}

// GPUs is the prepare.Profile of a node's NVIDIA GPUs through NVML.
type GPUs struct {
	lib     nvml.Interface
	node    mig.Node
	gpus    []*nvmlGPU
	devices map[string]partition
	opts    Options
	log     logr.Logger

	// mu serializes creating and destroying instances, and guards the
	// record: a record is written before the NVML call it announces.
	mu      sync.Mutex
	records *instanceRecords

	health health
}

var (
	_ driverkit.NoticeProfile     = (*GPUs)(nil)
	_ driverkit.LabelProfile      = (*GPUs)(nil)
	_ prepare.ConfigProfile       = (*GPUs)(nil)
	_ prepare.RequestEditsProfile = (*GPUs)(nil)
)

// PartitionProfile implements driverkit.LabelProfile: the MIG profile,
// full for a whole GPU.
func (g *GPUs) PartitionProfile(dev prepare.AllocatedDevice) string {
	part, err := g.lookup(dev.Pool, dev.Device)
	switch {
	case err != nil:
		return "unknown"
	case part.profile == "":
		return "full"
	}
	return part.profile
}

// DecodeConfig implements prepare.ConfigProfile: a gpu.GpuConfig.
func (g *GPUs) DecodeConfig(parameters runtime.RawExtension) (any, error) {
	return gpu.DecodeConfig(parameters)
}

// New discovers the GPUs of an initialized NVML library.
func New(lib nvml.Interface, opts Options, log logr.Logger) (*GPUs, error) {
	if opts.Driver == "" || opts.Node == "" || opts.StateDir == "" {
		return nil, errors.New("nvmlgpu: Driver, Node and StateDir must be set")
	}
	if opts.MigMinors == "" {
		opts.MigMinors = DefaultMigMinors
	}
	driverVersion, cudaVersion, gpus, err := discover(lib, log)
	if err != nil {
		return nil, fmt.Errorf("discover GPUs through NVML: %w", err)
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, err
	}
	st, err := loadState(filepath.Join(opts.StateDir, "nvml-instances.json"))
	if err != nil {
		return nil, err
	}
	g := &GPUs{lib: lib, gpus: gpus, opts: opts, log: log, records: st, devices: map[string]partition{}}
	g.node = mig.Node{Driver: opts.Driver, Node: opts.Node, DriverVersion: driverVersion, CUDADriverVersion: cudaVersion, Discovered: make([]mig.GPU, len(gpus))}
	for i, gp := range gpus {
		g.node.Discovered[i] = gp.GPU
		if !gp.MIG {
			g.devices[mig.GPUDeviceName(gp.Index)] = partition{gpu: gp}
			continue
		}
		for _, p := range gp.Model.Partitions(gp.Index) {
			part := partition{gpu: gp, start: uint32(p.Start), size: uint32(p.Slices)}
			if !p.Whole() {
				part.profile = p.Profile.Name
			}
			g.devices[p.DeviceName()] = part
		}
	}
	if opts.Clock != nil {
		g.health.now = opts.Clock.Now
	}
	g.health.init()
	return g, nil
}

// Node is the node's description for pkg/driver/mig, as discovered.
func (g *GPUs) Node() *mig.Node { return &g.node }

// Pool is the node's pool (with mixins; the kit flattens them for
// servers without KEP-5234).
func (g *GPUs) Pool() []*api.ResourceSlice { return g.node.Slices(mig.Mixins) }

func (g *GPUs) lookup(pool, device string) (partition, error) {
	if pool != g.opts.Node {
		return partition{}, fmt.Errorf("pool %s is not this node's (%s)", pool, g.opts.Node)
	}
	p, ok := g.devices[device]
	if !ok {
		return partition{}, fmt.Errorf("no device %s on this node", device)
	}
	return p, nil
}

// CreatePartition implements prepare.Profile: the GPU instance at the
// device's placement, then one compute instance over all of it, as
// `nvidia-smi mig -cgi <profile>:<start> -C` does, or of the configured
// computeInstanceProfile. A whole GPU is only recorded: it must have no
// GPU instance.
func (g *GPUs) CreatePartition(_ context.Context, claim types.UID, dev prepare.AllocatedDevice) (prepare.Partition, error) {
	part, err := g.lookup(dev.Pool, dev.Device)
	if err != nil {
		return prepare.Partition{}, err
	}
	ciSlices, err := part.computeSlices(gpu.Effective(dev))
	if err != nil {
		return prepare.Partition{}, fmt.Errorf("device %s: %w", dev.Device, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if in := g.records.find(claim, dev.Device); in != nil {
		if live, err := g.live(in); err != nil {
			return prepare.Partition{}, err
		} else if live && (in.Whole || in.CI != nil && in.UUID != "") {
			return in.partition(), nil // created before a crash: same answer
		}
		// Half made before a crash: start again.
		if err := g.destroy(in); err != nil {
			return prepare.Partition{}, err
		}
	}
	for _, other := range g.records.onGPU(part.gpu.UUID) {
		if other.Whole || part.whole() {
			return prepare.Partition{}, fmt.Errorf("insufficient resources on GPU %d: %s is prepared for claim %s", part.gpu.Index, other.Device, other.Claim)
		}
	}
	in := &instance{GPUUUID: part.gpu.UUID, Pool: dev.Pool, Device: dev.Device, Claim: claim}
	if part.whole() {
		if part.gpu.MIG {
			if n, err := g.gpuInstanceCount(part.gpu); err != nil {
				return prepare.Partition{}, err
			} else if n > 0 {
				return prepare.Partition{}, fmt.Errorf("insufficient resources on GPU %d: it has %d MIG GPU instances", part.gpu.Index, n)
			}
		}
		in.Whole, in.UUID = true, part.gpu.UUID
		if err := g.records.add(in); err != nil {
			return prepare.Partition{}, err
		}
		return in.partition(), nil
	}
	info := part.gpu.profiles[part.profile]
	in.Profile, in.ProfileID, in.Start, in.Size, in.ComputeSlices = part.profile, info.Id, part.start, part.size, ciSlices
	if err := g.records.add(in); err != nil {
		return prepare.Partition{}, err
	}
	if err := g.create(part, in, info); err != nil {
		if cerr := g.destroy(in); cerr != nil {
			return prepare.Partition{}, fmt.Errorf("%w (cleaning up failed too: %v)", err, cerr)
		}
		return prepare.Partition{}, err
	}
	return in.partition(), nil
}

func (g *GPUs) create(part partition, in *instance, info nvml.GpuInstanceProfileInfo) error {
	gi, ret := part.gpu.dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: part.start, Size: part.size})
	if ret != nvml.SUCCESS {
		return nvmlError(fmt.Sprintf("create GPU instance %s at memory slice %d on GPU %d", part.profile, part.start, part.gpu.Index), ret)
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return nvmlError("GPU instance info", ret)
	}
	// No save here: should the driver stop before the one below, the
	// record without GI finds this instance by profile and placement.
	in.GI = &giInfo.Id
	slices := info.SliceCount
	if in.ComputeSlices != 0 {
		slices = in.ComputeSlices
	}
	ciInfo, err := computeInstanceProfile(gi, slices)
	if err != nil {
		return fmt.Errorf("GPU instance %d on GPU %d: %w", giInfo.Id, part.gpu.Index, err)
	}
	ci, ret := gi.CreateComputeInstance(&ciInfo)
	if ret != nvml.SUCCESS {
		return nvmlError(fmt.Sprintf("create compute instance in GPU instance %d on GPU %d", giInfo.Id, part.gpu.Index), ret)
	}
	ciID, ret := computeInstanceID(ci)
	if ret != nvml.SUCCESS {
		return nvmlError("compute instance info", ret)
	}
	in.CI = &ciID
	uuid, err := migUUID(part.gpu.dev, int(giInfo.Id), int(ciID))
	if err != nil {
		return fmt.Errorf("GPU instance %d on GPU %d: %w", giInfo.Id, part.gpu.Index, err)
	}
	in.UUID = uuid
	if in.CapMinors, err = capMinors(g.opts.MigMinors, part.gpu.minor, giInfo.Id, ciID); err != nil {
		return err
	}
	return g.records.save()
}

func computeInstanceID(ci nvml.ComputeInstance) (uint32, nvml.Return) {
	info, ret := ci.GetInfo()
	return info.Id, ret
}

// computeInstanceProfile is the GPU instance's compute instance profile
// of that many compute slices; the one of all its slices makes a MIG
// device named like its GPU instance.
func computeInstanceProfile(gi nvml.GpuInstance, slices uint32) (nvml.ComputeInstanceProfileInfo, error) {
	var have []string
	for id := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		if info.SliceCount == slices {
			return info, nil
		}
		have = append(have, fmt.Sprintf("%dc", info.SliceCount))
	}
	return nvml.ComputeInstanceProfileInfo{}, fmt.Errorf("no compute instance profile of %d slices (it has %s)", slices, strings.Join(have, ", "))
}

// computeSlices checks a configured computeInstanceProfile against the
// device: 0 is the whole GPU instance.
func (p partition) computeSlices(cfg gpu.GpuConfig) (uint32, error) {
	if cfg.ComputeInstanceProfile == "" {
		return 0, nil
	}
	n, gi := cfg.ComputeSlices()
	switch {
	case p.whole():
		return 0, fmt.Errorf("computeInstanceProfile %s: applies to MIG devices, this is a whole GPU", cfg.ComputeInstanceProfile)
	case gi != "" && gi != p.profile:
		return 0, fmt.Errorf("computeInstanceProfile %s: is for GPU instances of profile %s, this device is a %s", cfg.ComputeInstanceProfile, gi, p.profile)
	case n > p.gpu.profiles[p.profile].SliceCount:
		return 0, fmt.Errorf("computeInstanceProfile %s: %d compute slices, a %s has %d", cfg.ComputeInstanceProfile, n, p.profile, p.gpu.profiles[p.profile].SliceCount)
	}
	return n, nil
}

// migUUID finds the MIG device of a GPU and compute instance.
func migUUID(dev nvml.Device, gi, ci int) (string, error) {
	n, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", nvmlError("MIG device count", ret)
	}
	for i := range n {
		h, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return "", nvmlError("MIG device handle", ret)
		}
		hgi, ret1 := h.GetGpuInstanceId()
		hci, ret2 := h.GetComputeInstanceId()
		if ret1 != nvml.SUCCESS || ret2 != nvml.SUCCESS || hgi != gi || hci != ci {
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			return "", nvmlError("MIG device UUID", ret)
		}
		return uuid, nil
	}
	return "", fmt.Errorf("no MIG device for compute instance %d", ci)
}

// capMinors reads the minors of the GPU instance's and the compute
// instance's capability device nodes from the kernel driver's table.
func capMinors(path string, gpuMinor int, gi, ci uint32) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("MIG capability minors: %w", err)
	}
	defer f.Close()
	want := []string{fmt.Sprintf("gpu%d/gi%d/access", gpuMinor, gi), fmt.Sprintf("gpu%d/gi%d/ci%d/access", gpuMinor, gi, ci)}
	out := make([]int, len(want))
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, minor, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		for i, w := range want {
			if ok && name == w {
				n, err := strconv.Atoi(strings.TrimSpace(minor))
				if err != nil {
					return nil, fmt.Errorf("%s: %s: minor %q is not a number", path, name, minor)
				}
				out[i] = n
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if found != len(want) {
		return nil, fmt.Errorf("%s lists no minor for %s", path, strings.Join(want, " or "))
	}
	return out, nil
}

func (g *GPUs) gpuInstanceCount(gp *nvmlGPU) (int, error) {
	n := 0
	for _, info := range gp.profiles {
		gis, ret := gp.dev.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return 0, nvmlError("list GPU instances", ret)
		}
		n += len(gis)
	}
	return n, nil
}

func (g *GPUs) gpuOf(uuid string) *nvmlGPU {
	for _, gp := range g.gpus {
		if gp.UUID == uuid {
			return gp
		}
	}
	return nil
}

// findGI is the record's GPU instance if NVML has it: by ID once known,
// else (a create interrupted before its ID was recorded) by profile and
// placement, which NVML lets only one instance have.
func (g *GPUs) findGI(in *instance) (nvml.GpuInstance, error) {
	gp := g.gpuOf(in.GPUUUID)
	if gp == nil {
		return nil, nil // the GPU is gone: so is the instance
	}
	info, ok := gp.profiles[in.Profile]
	if !ok {
		return nil, nil
	}
	gis, ret := gp.dev.GetGpuInstances(&info)
	if ret != nvml.SUCCESS {
		return nil, nvmlError("list GPU instances", ret)
	}
	for _, gi := range gis {
		gInfo, ret := gi.GetInfo()
		if ret != nvml.SUCCESS {
			return nil, nvmlError("GPU instance info", ret)
		}
		if gInfo.Placement.Start != in.Start || gInfo.Placement.Size != in.Size {
			continue
		}
		if in.GI == nil || *in.GI == gInfo.Id {
			return gi, nil
		}
	}
	return nil, nil
}

// live reports whether the record's partition exists on the hardware.
func (g *GPUs) live(in *instance) (bool, error) {
	if in.Whole {
		return g.gpuOf(in.GPUUUID) != nil, nil
	}
	gi, err := g.findGI(in)
	return gi != nil, err
}

// destroy removes the record's compute and GPU instance, then the record.
func (g *GPUs) destroy(in *instance) error {
	if !in.Whole {
		gi, err := g.findGI(in)
		if err != nil {
			return err
		}
		if gi != nil {
			if err := destroyGI(gi); err != nil {
				return err
			}
		}
	}
	return g.records.remove(in)
}

// destroyGI destroys a GPU instance's compute instances, then it: NVML
// refuses to destroy a GPU instance in use.
func destroyGI(gi nvml.GpuInstance) error {
	for id := range nvml.COMPUTE_INSTANCE_PROFILE_COUNT {
		info, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		cis, ret := gi.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return nvmlError("list compute instances", ret)
		}
		for _, ci := range cis {
			if ret := ci.Destroy(); ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_FOUND {
				return nvmlError("destroy compute instance", ret)
			}
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_FOUND {
		return nvmlError("destroy GPU instance", ret)
	}
	return nil
}

// DestroyPartition implements prepare.Profile.
func (g *GPUs) DestroyPartition(_ context.Context, p prepare.Partition) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	in := g.records.find(p.Claim, p.Device)
	if in == nil {
		return nil
	}
	return g.destroy(in)
}

// Partitions implements prepare.Profile: the partitions the driver
// recorded and NVML still has. Instances it did not record are not
// listed, so the kit never destroys them; records whose instance is gone
// (a GPU reset, an administrator) are dropped.
func (g *GPUs) Partitions(context.Context) ([]prepare.Partition, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []prepare.Partition
	var gone []*instance
	for _, in := range g.records.instances {
		live, err := g.live(in)
		if err != nil {
			return nil, err
		}
		if !live {
			gone = append(gone, in)
			continue
		}
		out = append(out, in.partition())
	}
	for _, in := range gone {
		g.log.Info("Forgetting a recorded partition NVML no longer has", "device", in.Device, "claim", in.Claim, "gpu", in.GPUUUID)
		if err := g.records.remove(in); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ContainerEdits implements prepare.Profile with the device nodes
// NVIDIA's container toolkit expects — the control and UVM nodes, the
// parent GPU's node and, for a MIG device, the capability nodes of its
// GPU and compute instance — given by path (the runtime reads their
// numbers from the host, under DevRoot), and DRACTL_GPU_<DEVICE>_* variables naming the
// device, as with the mock backend, with what its configuration sets.
// NVIDIA_VISIBLE_DEVICES lists all of a container's devices: see
// RequestEdits.
func (g *GPUs) ContainerEdits(claim types.UID, dev prepare.AllocatedDevice, p prepare.Partition) cdispec.ContainerEdits {
	part, err := g.lookup(dev.Pool, dev.Device)
	if err != nil {
		return cdispec.ContainerEdits{}
	}
	g.mu.Lock()
	in := g.records.find(claim, dev.Device)
	var minors []int
	var ciSlices uint32
	if in != nil {
		minors, ciSlices = in.CapMinors, in.ComputeSlices
	}
	g.mu.Unlock()
	profile := part.profile
	if part.whole() {
		profile = "full"
	}
	env := gpu.EnvPrefix(dev.Device)
	edits := cdispec.ContainerEdits{
		Env: []string{
			env + "GPU_UUID=" + part.gpu.UUID,
			env + "GPU_INDEX=" + strconv.Itoa(part.gpu.Index),
			env + "PROFILE=" + profile,
			env + "UUID=" + p.ID,
			env + "CLAIM=" + string(claim),
		},
		DeviceNodes: []*cdispec.DeviceNode{
			g.deviceNode("nvidiactl"), g.deviceNode("nvidia-uvm"), g.deviceNode("nvidia-uvm-tools"),
			g.deviceNode(fmt.Sprintf("nvidia%d", part.gpu.minor)),
		},
	}
	if ciSlices != 0 {
		edits.Env = append(edits.Env, fmt.Sprintf("%sCOMPUTE_INSTANCE_PROFILE=%dc.%s", env, ciSlices, part.profile))
	}
	edits.Env = append(edits.Env, gpu.Effective(dev).Env(env)...)
	for _, m := range minors {
		edits.DeviceNodes = append(edits.DeviceNodes, g.deviceNode(fmt.Sprintf("nvidia-caps/nvidia-cap%d", m)))
	}
	return edits
}

// deviceNode is a node of /dev in the container, read from DevRoot's dev/
// on the host.
func (g *GPUs) deviceNode(name string) *cdispec.DeviceNode {
	n := &cdispec.DeviceNode{Path: "/dev/" + name}
	if g.opts.DevRoot != "" && g.opts.DevRoot != "/" {
		n.HostPath = filepath.Join(g.opts.DevRoot, "dev", name)
	}
	return n
}

// RequestEdits implements prepare.RequestEditsProfile: the toolkit's
// NVIDIA_VISIBLE_DEVICES names every MIG device (or GPU) of the request by
// UUID, in allocation order; one variable per device would leave a
// container with two MIG devices seeing only the last.
func (g *GPUs) RequestEdits(_ types.UID, _ string, devices []prepare.PreparedDevice) cdispec.ContainerEdits {
	ids := make([]string, 0, len(devices))
	for _, d := range devices {
		if d.Partition != nil {
			ids = append(ids, d.Partition.ID)
		}
	}
	return cdispec.ContainerEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}}
}
