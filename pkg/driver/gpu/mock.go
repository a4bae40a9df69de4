package gpu

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// GPUs is one node's simulated GPUs.
type GPUs struct {
	mig.Node
	// Dir holds one directory per GPU with its MIG devices, and
	// "unhealthy/<gpu index or device>" and "notices/<...>" files (see
	// Health and Notices).
	Dir string

	mu sync.Mutex // serializes create against create, as the GPU does
}

var (
	_ driverkit.NoticeProfile = (*GPUs)(nil)
	_ driverkit.LabelProfile  = (*GPUs)(nil)
	_ prepare.ConfigProfile   = (*GPUs)(nil)
)

// PartitionProfile implements driverkit.LabelProfile: the MIG profile,
// full for a whole GPU.
func (g *GPUs) PartitionProfile(dev prepare.AllocatedDevice) string {
	part, ok := g.Model.PartitionByDevice(g.GPUs, dev.Device)
	if !ok {
		return "unknown"
	}
	return part.ProfileName()
}

// DecodeConfig implements prepare.ConfigProfile: a GpuConfig.
func (g *GPUs) DecodeConfig(parameters runtime.RawExtension) (any, error) {
	return DecodeConfig(parameters)
}

// New describes count GPUs of a model (see mig.ModelByName) on a node.
func New(driver, node, model string, count int, dir string) (*GPUs, error) {
	m, err := mig.ModelByName(model)
	if err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, fmt.Errorf("GPU count %d: need at least one", count)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &GPUs{Dir: dir, Node: mig.Node{
		Driver: driver, Node: node, Model: m, GPUs: count,
		DriverVersion: "550.54.15", CUDADriverVersion: "12.4.0",
	}}, nil
}

// Pool is the node's pool description: one counter set per GPU, every
// placement of every profile and the whole GPU as devices, with mixins
// (the kit flattens them for servers without KEP-5234).
func (g *GPUs) Pool() []*api.ResourceSlice { return g.Slices(mig.Mixins) }

// instance is the file of one MIG device (or of a whole GPU in use).
type instance struct {
	UUID    string    `json:"uuid"`
	GPU     int       `json:"gpu"`
	GPUUUID string    `json:"gpuUUID"`
	Profile string    `json:"profile"`
	Start   int       `json:"placementStart"`
	Slices  int       `json:"placementSize"`
	Pool    string    `json:"pool"`
	Device  string    `json:"device"`
	Claim   types.UID `json:"claim"`
}

func (g *GPUs) gpuDir(gpu int) string { return filepath.Join(g.Dir, fmt.Sprintf("gpu-%d", gpu)) }

func (g *GPUs) instancePath(gpu int, device string) string {
	return filepath.Join(g.gpuDir(gpu), device+".json")
}

// CreatePartition implements prepare.Profile.
func (g *GPUs) CreatePartition(_ context.Context, claim types.UID, dev prepare.AllocatedDevice) (prepare.Partition, error) {
	if dev.Pool != g.Node.Node {
		return prepare.Partition{}, fmt.Errorf("pool %s is not this node's (%s)", dev.Pool, g.Node.Node)
	}
	part, ok := g.Model.PartitionByDevice(g.GPUs, dev.Device)
	if !ok {
		return prepare.Partition{}, fmt.Errorf("no device %s on %d %s GPUs", dev.Device, g.GPUs, g.Model.Name)
	}
	if p := Effective(dev).ComputeInstanceProfile; p != "" {
		// pkg/driver/mig's tables have no compute instance profiles to check
		// it against; creating what cannot be checked would be a lie.
		return prepare.Partition{}, fmt.Errorf("device %s: computeInstanceProfile %s: the mock backend simulates GPU instances only (use --backend=nvml)", dev.Device, p)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	existing, err := g.instances(part.GPU)
	if err != nil {
		return prepare.Partition{}, err
	}
	for _, in := range existing {
		if in.Device == dev.Device && in.Claim == claim {
			return in.partition(), nil // created before a crash: same answer
		}
	}
	if err := g.fits(part, existing); err != nil {
		return prepare.Partition{}, err
	}
	in := instance{
		GPU: part.GPU, GPUUUID: g.GPUUUID(part.GPU), Profile: part.ProfileName(), Start: part.Start, Slices: part.Slices,
		Pool: dev.Pool, Device: dev.Device, Claim: claim,
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s", in.GPUUUID, dev.Device, claim))
	in.UUID = fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	if part.Whole() {
		in.UUID = in.GPUUUID
	}
	data, err := json.Marshal(in)
	if err != nil {
		return prepare.Partition{}, err
	}
	if err := os.MkdirAll(g.gpuDir(part.GPU), 0o755); err != nil {
		return prepare.Partition{}, err
	}
	if err := prepare.WriteFileAtomic(g.instancePath(part.GPU, dev.Device), data); err != nil {
		return prepare.Partition{}, err
	}
	return in.partition(), nil
}

// fits is the GPU's own check: memory slices not taken, and the sum of
// every profile resource within what MIG shares.
func (g *GPUs) fits(part mig.Partition, existing []instance) error {
	need := func(p mig.Partition) mig.Resources {
		if p.Whole() {
			return g.Model.Shared
		}
		return p.Profile.Resources
	}
	total := need(part)
	mem := resource.MustParse(total.Memory)
	for _, in := range existing {
		if in.Start < part.Start+part.Slices && part.Start < in.Start+in.Slices {
			return fmt.Errorf("insufficient resources on GPU %d: memory slices %d-%d are used by %s (%s, claim %s)",
				part.GPU, in.Start, in.Start+in.Slices-1, in.UUID, in.Profile, in.Claim)
		}
		other := g.Model.Shared
		if p, ok := g.Model.Profile(in.Profile); ok {
			other = p.Resources
		}
		mem.Add(resource.MustParse(other.Memory))
		total.Multiprocessors += other.Multiprocessors
		total.CopyEngines += other.CopyEngines
		total.Decoders += other.Decoders
		total.Encoders += other.Encoders
		total.JPEGEngines += other.JPEGEngines
		total.OFAEngines += other.OFAEngines
	}
	s := g.Model.Shared
	if mem.Cmp(resource.MustParse(s.Memory)) > 0 || total.Multiprocessors > s.Multiprocessors || total.CopyEngines > s.CopyEngines ||
		total.Decoders > s.Decoders || total.Encoders > s.Encoders || total.JPEGEngines > s.JPEGEngines || total.OFAEngines > s.OFAEngines {
		return fmt.Errorf("insufficient resources on GPU %d for %s: its MIG devices would need more than it shares", part.GPU, part.DeviceName())
	}
	return nil
}

func (in instance) partition() prepare.Partition {
	return prepare.Partition{ID: in.UUID, Pool: in.Pool, Device: in.Device, Claim: in.Claim}
}

// DestroyPartition implements prepare.Profile.
func (g *GPUs) DestroyPartition(_ context.Context, p prepare.Partition) error {
	part, ok := g.Model.PartitionByDevice(g.GPUs, p.Device)
	if !ok {
		return fmt.Errorf("no device %s on %d %s GPUs", p.Device, g.GPUs, g.Model.Name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	err := os.Remove(g.instancePath(part.GPU, p.Device))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Partitions implements prepare.Profile.
func (g *GPUs) Partitions(context.Context) ([]prepare.Partition, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []prepare.Partition
	for gpu := range g.GPUs {
		ins, err := g.instances(gpu)
		if err != nil {
			return nil, err
		}
		for _, in := range ins {
			out = append(out, in.partition())
		}
	}
	return out, nil
}

func (g *GPUs) instances(gpu int) ([]instance, error) {
	entries, err := os.ReadDir(g.gpuDir(gpu))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instance
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".json" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(g.gpuDir(gpu), e.Name()))
		if err != nil {
			return nil, err
		}
		var in instance
		if err := json.Unmarshal(data, &in); err != nil {
			return nil, fmt.Errorf("MIG device %s: %w", filepath.Join(g.gpuDir(gpu), e.Name()), err)
		}
		out = append(out, in)
	}
	return out, nil
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// EnvPrefix is the prefix of a device's environment variables in a
// container: DRACTL_GPU_<DEVICE>_, the device name upper-cased with
// underscores ("gpu-0-mig-1g-5gb-0" → DRACTL_GPU_GPU_0_MIG_1G_5GB_0_).
func EnvPrefix(device string) string {
	return "DRACTL_GPU_" + strings.ToUpper(nonWord.ReplaceAllString(device, "_")) + "_"
}

// Device node numbers of the simulated GPUs: NVIDIA's kernel driver's
// major for its GPUs (minor = GPU index), and a major for the MIG
// capability nodes (dynamic on a real host), whose minors count every
// MIG placement of every GPU.
const (
	GPUMajor    = 195
	MIGCapMajor = 511
)

// DevDir is where the simulated kernel driver's device nodes are: what a
// real host has under /dev (nvidia0, nvidia-caps/nvidia-cap3, ...).
func (g *GPUs) DevDir() string { return filepath.Join(g.Dir, "dev") }

// deviceNode is one node of DevDir: its path under /dev and numbers.
type deviceNode struct {
	path         string
	major, minor uint32
}

func (g *GPUs) deviceNodes() []deviceNode {
	var out []deviceNode
	for gpu := range g.GPUs {
		out = append(out, deviceNode{fmt.Sprintf("nvidia%d", gpu), GPUMajor, uint32(gpu)})
		for i, q := range g.Model.Partitions(gpu) {
			if !q.Whole() {
				m := g.capMinor(gpu, i)
				out = append(out, deviceNode{fmt.Sprintf("nvidia-caps/nvidia-cap%d", m), MIGCapMajor, uint32(m)})
			}
		}
	}
	return out
}

// capMinor is the capability node minor of the i-th partition of a GPU.
func (g *GPUs) capMinor(gpu, i int) int { return gpu*g.Model.DevicesPerGPU() + i }

// CreateDeviceNodes makes the device nodes of the simulated GPUs in
// DevDir, character devices with their numbers, as the kernel driver
// does when it loads: the CDI edits name them as the host's nodes, so
// that a container runtime reads their numbers from the host and a
// container sees them. Nodes already there with the right numbers stay.
// Making them takes CAP_MKNOD.
func (g *GPUs) CreateDeviceNodes() error {
	for _, n := range g.deviceNodes() {
		if err := prepare.MakeCharDevice(filepath.Join(g.DevDir(), n.path), n.major, n.minor); err != nil {
			return fmt.Errorf("simulated GPU: %w", err)
		}
	}
	return nil
}

// ContainerEdits implements prepare.Profile: environment variables
// naming the GPU and the MIG device, the GPU's device node (and the MIG
// capability node) from DevDir, given by host path only so that the
// runtime takes their numbers from the host, and the MIG device's file
// mounted read-only.
func (g *GPUs) ContainerEdits(claim types.UID, dev prepare.AllocatedDevice, p prepare.Partition) cdispec.ContainerEdits {
	part, _ := g.Model.PartitionByDevice(g.GPUs, dev.Device)
	env := EnvPrefix(dev.Device)
	node := func(path string) *cdispec.DeviceNode {
		return &cdispec.DeviceNode{Path: "/dev/" + path, HostPath: filepath.Join(g.DevDir(), path)}
	}
	edits := cdispec.ContainerEdits{
		Env: []string{
			env + "GPU_UUID=" + g.GPUUUID(part.GPU),
			env + "GPU_INDEX=" + strconv.Itoa(part.GPU),
			env + "PROFILE=" + part.ProfileName(),
			env + "UUID=" + p.ID,
			env + "CLAIM=" + string(claim),
		},
		DeviceNodes: []*cdispec.DeviceNode{node(fmt.Sprintf("nvidia%d", part.GPU))},
		Mounts: []*cdispec.Mount{{
			HostPath: g.instancePath(part.GPU, dev.Device), ContainerPath: "/var/run/dractl-gpu/" + dev.Device + ".json",
			Options: []string{"ro", "bind"},
		}},
	}
	edits.Env = append(edits.Env, Effective(dev).Env(env)...)
	if !part.Whole() {
		// One capability node per MIG device, as NVIDIA's driver exposes.
		for i, q := range g.Model.Partitions(part.GPU) {
			if q.DeviceName() == dev.Device {
				edits.DeviceNodes = append(edits.DeviceNodes, node(fmt.Sprintf("nvidia-caps/nvidia-cap%d", g.capMinor(part.GPU, i))))
			}
		}
	}
	return edits
}

// Health implements driverkit.HealthProfile: a file unhealthy/<name> in
// Dir marks a device unhealthy, its content being the reason. A name that
// is a GPU's index marks the GPU with all its devices; any other name is
// taken as a device name (published or not: the kit refuses those it does
// not publish). Names starting with "." or ending in ".tmp" are files
// being written and are skipped. Removing the file makes the device
// healthy again.
func (g *GPUs) Health(context.Context) (map[prepare.DeviceKey]string, error) {
	return g.marked("unhealthy")
}

// Notices implements driverkit.NoticeProfile: files notices/<name> in Dir,
// named as for Health, report an event that leaves the device healthy
// (an application's fault, say).
func (g *GPUs) Notices(context.Context) (map[prepare.DeviceKey]string, error) {
	return g.marked("notices")
}

// marked reads the devices the files of Dir/sub name, with their content.
func (g *GPUs) marked(sub string) (map[prepare.DeviceKey]string, error) {
	out := map[prepare.DeviceKey]string{}
	entries, err := os.ReadDir(filepath.Join(g.Dir, sub))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(g.Dir, sub, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, err
		}
		reason := strings.TrimSpace(string(data))
		if gpu, err := strconv.Atoi(name); err == nil && gpu >= 0 && gpu < g.GPUs {
			for _, p := range g.Model.Partitions(gpu) {
				out[prepare.DeviceKey{Pool: g.Node.Node, Device: p.DeviceName()}] = reason
			}
			continue
		}
		out[prepare.DeviceKey{Pool: g.Node.Node, Device: name}] = reason
	}
	return out, nil
}

// DeviceClasses are the classes of deploy/driver/deviceclasses.yaml: whole
// GPUs, any MIG device, and one class per MIG profile of every model,
// named <what>.<domain>: gpu.dractl.dev, mig.dractl.dev,
// mig-1g-5gb.dractl.dev.
func DeviceClasses(driver, domain string) []*resourcev1.DeviceClass {
	class := func(name, expr string) *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == '%s' && ", driver) + expr},
			}}},
		}
	}
	attr := fmt.Sprintf("device.attributes['%s']", driver)
	out := []*resourcev1.DeviceClass{
		class("gpu."+domain, attr+".type == 'gpu'"),
		class("mig."+domain, attr+".type == 'mig'"),
	}
	seen := map[string]bool{}
	for _, m := range mig.Models {
		for _, p := range m.SmallestFirst() {
			if seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			out = append(out, class("mig-"+mig.ProfileLabel(p.Name)+"."+domain, fmt.Sprintf("%s.type == 'mig' && %s.profile == '%s'", attr, attr, p.Name)))
		}
	}
	return out
}
