package nvmlgpu

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"

	"github.com/dractl/dractl/pkg/driver/mig"
)

// nvmlGPU is one GPU as NVML reports it.
type nvmlGPU struct {
	mig.GPU
	dev   nvml.Device
	minor int
	// profiles are the GPU instance profiles by name (MIG GPUs only).
	profiles map[string]nvml.GpuInstanceProfileInfo
}

// partition is what a published device stands for on its GPU.
type partition struct {
	gpu *nvmlGPU
	// profile is empty for the whole GPU.
	profile     string
	start, size uint32
}

func (p partition) whole() bool { return p.profile == "" }

// nvmlError wraps an NVML return code with what was being done.
func nvmlError(what string, ret nvml.Return) error {
	return fmt.Errorf("%s: %w", what, ret)
}

// discover reads the node's GPUs from NVML: identity, memory, MIG mode and,
// for GPUs with MIG on, every GPU instance profile and its placements. No
// table is consulted: what NVML says is what is published.
func discover(lib nvml.Interface, log logr.Logger) (driverVersion, cudaVersion string, gpus []*nvmlGPU, err error) {
	v, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", "", nil, nvmlError("driver version", ret)
	}
	if driverVersion, err = semver(v); err != nil {
		return "", "", nil, fmt.Errorf("driver version: %w", err)
	}
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return "", "", nil, nvmlError("CUDA driver version", ret)
	}
	// NVML encodes CUDA 12.4 as 12040.
	cudaVersion = fmt.Sprintf("%d.%d.0", cuda/1000, cuda%1000/10)
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return "", "", nil, nvmlError("GPU count", ret)
	}
	models := map[string][]*mig.GPUModel{}
	for i := range n {
		g, err := discoverGPU(lib, i, log)
		if err != nil {
			return "", "", nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		g.Model = sameModel(models, g.Model)
		gpus = append(gpus, g)
	}
	return driverVersion, cudaVersion, gpus, nil
}

// sameModel shares one *GPUModel between GPUs that report the same, so
// that their counter sets include one mixin; two different reports under
// one product name get distinct names.
func sameModel(models map[string][]*mig.GPUModel, m *mig.GPUModel) *mig.GPUModel {
	known := models[m.ProductName]
	for _, k := range known {
		c := *m
		c.Name = k.Name
		if reflect.DeepEqual(&c, k) {
			return k
		}
	}
	if len(known) > 0 {
		m.Name = fmt.Sprintf("%s-%d", m.Name, len(known))
	}
	models[m.ProductName] = append(known, m)
	return m
}

func discoverGPU(lib nvml.Interface, i int, log logr.Logger) (*nvmlGPU, error) {
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, nvmlError("handle", ret)
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("UUID", ret)
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("name", ret)
	}
	minor, ret := dev.GetMinorNumber()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("minor number", ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("memory", ret)
	}
	brand, ret := dev.GetBrand()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("brand", ret)
	}
	arch, ret := dev.GetArchitecture()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("architecture", ret)
	}
	major, minorCC, ret := dev.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("compute capability", ret)
	}
	g := &nvmlGPU{dev: dev, minor: minor, GPU: mig.GPU{Index: i, UUID: uuid, Model: &mig.GPUModel{
		Name:              label(name),
		ProductName:       name,
		Brand:             brandName(brand),
		Architecture:      archName(arch),
		ComputeCapability: fmt.Sprintf("%d.%d.0", major, minorCC),
		Whole:             mig.Resources{Memory: mebibytes(mem.Total >> 20)},
	}}}

	current, pending, ret := dev.GetMigMode()
	switch {
	case ret == nvml.ERROR_NOT_SUPPORTED:
		log.Info("Publishing GPU as one whole device: it is not MIG-capable", "gpu", i, "uuid", uuid, "model", name)
		return g, nil
	case ret != nvml.SUCCESS:
		return nil, nvmlError("MIG mode", ret)
	case current != nvml.DEVICE_MIG_ENABLE:
		log.Info("Publishing GPU as one whole device: MIG mode is off (enable it with nvidia-smi -i <gpu> -mig 1 to publish its MIG placements)",
			"gpu", i, "uuid", uuid, "model", name, "pendingMIGMode", pending)
		return g, nil
	case pending != current:
		log.Info("GPU has a MIG mode change pending until its next reset; publishing the current mode", "gpu", i, "uuid", uuid, "pendingMIGMode", pending)
	}
	if err := g.discoverProfiles(mem.Total); err != nil {
		return nil, err
	}
	g.MIG = true
	return g, nil
}

// discoverProfiles builds the GPU's MIG table from NVML: every GPU
// instance profile it supports, with its placements. Memory slices are
// what placements cover; what MIG instances share (the GPU's counter set)
// is the largest profile's engines and the GPU's whole memory.
func (g *nvmlGPU) discoverProfiles(totalBytes uint64) error {
	m := g.Model
	var ids []int
	var infos []nvml.GpuInstanceProfileInfo
	var full nvml.GpuInstanceProfileInfo
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := g.dev.GetGpuInstanceProfileInfo(id)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return nvmlError(fmt.Sprintf("GPU instance profile %d", id), ret)
		}
		placements, ret := g.dev.GetGpuInstancePossiblePlacements(&info)
		if ret != nvml.SUCCESS {
			return nvmlError(fmt.Sprintf("placements of GPU instance profile %d", id), ret)
		}
		if len(placements) == 0 {
			continue
		}
		p := mig.Profile{
			Resources: mig.Resources{
				Memory:          mebibytes(info.MemorySizeMB),
				Multiprocessors: int64(info.MultiprocessorCount),
				CopyEngines:     int64(info.CopyEngineCount),
				Decoders:        int64(info.DecoderCount),
				Encoders:        int64(info.EncoderCount),
				JPEGEngines:     int64(info.JpegCount),
				OFAEngines:      int64(info.OfaCount),
			},
			MemorySlices: int(placements[0].Size),
		}
		for _, pl := range placements {
			if int(pl.Size) != p.MemorySlices {
				return fmt.Errorf("GPU instance profile %d: placements of %d and %d memory slices; one size per profile expected", id, p.MemorySlices, pl.Size)
			}
			p.Placements = append(p.Placements, int(pl.Start))
			m.MemorySlices = max(m.MemorySlices, int(pl.Start+pl.Size))
		}
		slices.Sort(p.Placements)
		m.Profiles = append(m.Profiles, p)
		ids, infos = append(ids, id), append(infos, info)
		if info.SliceCount > full.SliceCount || info.SliceCount == full.SliceCount && info.MultiprocessorCount > full.MultiprocessorCount {
			full = info
		}
	}
	if len(m.Profiles) == 0 {
		return fmt.Errorf("MIG mode is on but NVML reports no GPU instance profile with a placement")
	}
	names, err := profileNames(ids, infos, totalBytes)
	if err != nil {
		return err
	}
	g.profiles = map[string]nvml.GpuInstanceProfileInfo{}
	for i := range m.Profiles {
		m.Profiles[i].Name = names[i]
		g.profiles[names[i]] = infos[i]
	}
	m.Whole = mig.Resources{
		Memory:          mebibytes(totalBytes >> 20),
		Multiprocessors: int64(full.MultiprocessorCount),
		CopyEngines:     int64(full.CopyEngineCount),
		Decoders:        int64(full.DecoderCount),
		Encoders:        int64(full.EncoderCount),
		JPEGEngines:     int64(full.JpegCount),
		OFAEngines:      int64(full.OfaCount),
	}
	m.Shared = m.Whole
	return nil
}

// profileNames names GPU instance profiles as nvidia-smi does:
// <compute slices>g.<memory>gb, plus a suffix for the variants (+me has
// the media engines, -me none, +me.all all of them, +gfx graphics).
// Memory is NVIDIA's rounding: the profile's share of the GPU's memory
// rounded up to eighths, times the GPU's memory in whole GiB. Should that
// give two profiles one name — it does only when profiles report more
// memory than their eighth, as go-nvml's H200 and B200 mocks do — the
// memory rounded up to whole GiB is used instead.
func profileNames(ids []int, infos []nvml.GpuInstanceProfileInfo, totalBytes uint64) ([]string, error) {
	totalGiB := (totalBytes + 1<<30 - 1) >> 30
	byShare := func(mb uint64) uint64 {
		eighths := (mb<<20*8 + totalBytes - 1) / totalBytes
		return (eighths*totalGiB*2 + 8) / 16 // eighths*totalGiB/8, rounded half up
	}
	byGiB := func(mb uint64) uint64 { return (mb + 1023) / 1024 }
	for _, gb := range []func(uint64) uint64{byShare, byGiB} {
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = fmt.Sprintf("%dg.%dgb%s", infos[i].SliceCount, gb(infos[i].MemorySizeMB), profileSuffix(id))
		}
		if sorted := slices.Sorted(slices.Values(names)); len(slices.Compact(sorted)) == len(names) {
			return names, nil
		}
	}
	return nil, fmt.Errorf("GPU instance profiles %v cannot be told apart by compute slices and memory", ids)
}

func profileSuffix(id int) string {
	switch id {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		return "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		return "-me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		return "+me.all"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		return "+gfx"
	}
	return ""
}

func mebibytes(mb uint64) string { return strconv.FormatUint(mb, 10) + "Mi" }

var nonLabel = regexp.MustCompile(`[^a-z0-9]+`)

// label turns a product name into a DNS label, the name of the model's
// counter-set mixin: "NVIDIA A100-SXM4-40GB" → "a100-sxm4-40gb".
func label(product string) string {
	l := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(product), "-"), "-")
	l = strings.TrimPrefix(l, "nvidia-")
	if len(l) > 63 {
		l = strings.TrimRight(l[:63], "-")
	}
	if l == "" {
		l = "gpu"
	}
	return l
}

// semver makes a driver version ("560.35.03") a semantic version
// ("560.35.3"): no leading zeros, three parts.
func semver(v string) (string, error) {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) == 0 || len(parts) > 3 {
		return "", fmt.Errorf("%q is not a version of up to three numbers", v)
	}
	out := make([]string, 3)
	for i := range out {
		out[i] = "0"
		if i < len(parts) {
			n, err := strconv.ParseUint(parts[i], 10, 32)
			if err != nil {
				return "", fmt.Errorf("%q is not a version of up to three numbers", v)
			}
			out[i] = strconv.FormatUint(n, 10)
		}
	}
	return strings.Join(out, "."), nil
}

func archName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada Lovelace"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	case nvml.DEVICE_ARCH_RUBIN:
		return "Rubin"
	}
	return "Unknown"
}

func brandName(b nvml.BrandType) string {
	switch b {
	case nvml.BRAND_QUADRO:
		return "Quadro"
	case nvml.BRAND_TESLA:
		return "Tesla"
	case nvml.BRAND_NVS:
		return "NVS"
	case nvml.BRAND_GRID:
		return "GRID"
	case nvml.BRAND_GEFORCE:
		return "GeForce"
	case nvml.BRAND_TITAN:
		return "Titan"
	case nvml.BRAND_NVIDIA:
		return "Nvidia"
	}
	return "Unknown"
}
