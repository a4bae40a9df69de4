package mig

// Partition is what one device of a MIG pool stands for on its GPU: a MIG
// instance of one profile at one placement, or the whole GPU with MIG off.
type Partition struct {
	GPU     int
	Profile *Profile // nil for the whole GPU
	// Start and Slices are the memory slices [Start, Start+Slices) the
	// partition covers; the whole GPU covers them all.
	Start, Slices int
}

// Whole reports whether p is the full GPU.
func (p Partition) Whole() bool { return p.Profile == nil }

// DeviceName is the name of p's device in the pool.
func (p Partition) DeviceName() string {
	if p.Whole() {
		return GPUDeviceName(p.GPU)
	}
	return MIGDeviceName(p.GPU, p.Profile.Name, p.Start)
}

// ProfileName is the profile, or "full" for the whole GPU.
func (p Partition) ProfileName() string {
	if p.Whole() {
		return "full"
	}
	return p.Profile.Name
}

// Partitions lists one GPU's partitions in the order its devices are
// published: every placement smallest profile first, the whole GPU last.
func (m *GPUModel) Partitions(gpu int) []Partition {
	out := make([]Partition, 0, m.DevicesPerGPU())
	for _, p := range m.SmallestFirst() {
		for _, start := range p.Placements {
			out = append(out, Partition{GPU: gpu, Profile: p, Start: start, Slices: p.MemorySlices})
		}
	}
	return append(out, Partition{GPU: gpu, Start: 0, Slices: m.MemorySlices})
}

// PartitionByDevice finds the partition a device name stands for on a node
// with gpus GPUs of model m.
func (m *GPUModel) PartitionByDevice(gpus int, device string) (Partition, bool) {
	for gpu := range gpus {
		for _, p := range m.Partitions(gpu) {
			if p.DeviceName() == device {
				return p, true
			}
		}
	}
	return Partition{}, false
}
