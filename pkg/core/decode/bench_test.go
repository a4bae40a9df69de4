package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/coretest"
)

// profiles are the partitions of one GPU: name, count, memory, compute
// slices. Each GPU gives 1+7+3+2+1+1+2+1+1 = 19 devices, so a node with 8
// GPUs gives 152 and 1,000 nodes about 150k, the project's target size.
var profiles = []struct {
	name         string
	n            int
	memGi, slice int
}{
	{"whole", 1, 80, 7}, {"1g.10gb", 7, 10, 1}, {"2g.20gb", 3, 20, 2}, {"3g.40gb", 2, 40, 3},
	{"4g.40gb", 1, 40, 4}, {"7g.80gb", 1, 80, 7}, {"1g.20gb", 2, 20, 1}, {"1g.10gb+me", 1, 10, 1}, {"2g.20gb+me", 1, 20, 2},
}

// clusterYAML writes one ResourceSlice per node in mixin form (KEP-5234),
// shaped like a MIG-partitioned 8-GPU server (KEP-4815).
func clusterYAML(nodes, gpus int) (data []byte, devices int) {
	var b strings.Builder
	for n := range nodes {
		fmt.Fprintf(&b, `---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-%[1]d-gpu.example.com
spec:
  driver: gpu.example.com
  nodeName: node-%[1]d
  pool: {name: node-%[1]d, generation: 1, resourceSliceCount: 1}
  mixins:
    device:
    - name: h100
      attributes:
        model: {string: H100-SXM5-80GB}
        driverVersion: {version: 550.54.15}
        cudaComputeCapability: {version: 9.0.0}
    counterSet:
    - name: h100-counters
      counters:
        memory: {value: 80Gi}
        slices: {value: "7"}
  sharedCounters:
`, n)
		for g := range gpus {
			fmt.Fprintf(&b, "  - name: gpu-%d-counters\n    includes: [h100-counters]\n", g)
		}
		b.WriteString("  devices:\n")
		for g := range gpus {
			for _, p := range profiles {
				for i := range p.n {
					devices++
					fmt.Fprintf(&b, `  - name: gpu-%[1]d-%[2]s-%[3]d
    includes: [h100]
    attributes:
      index: {int: %[1]d}
      profile: {string: %[2]s}
      uuid: {string: GPU-%08[4]x-%04[1]x-%04[5]x}
    capacity:
      memory: {value: %[6]dGi}
    consumesCounters:
    - counterSet: gpu-%[1]d-counters
      counters:
        memory: {value: %[6]dGi}
        slices: {value: "%[7]d"}
`, g, p.name, i, n, devices, p.memGi, p.slice)
				}
			}
		}
	}
	return []byte(b.String()), devices
}

// BenchmarkDecodeLargeCluster decodes 1,000 nodes of 8 partitioned GPUs
// (about 150k devices) from YAML and from JSON.
func BenchmarkDecodeLargeCluster(b *testing.B) {
	yamlData, devices := clusterYAML(1000, 8)
	objs, err := Bytes("cluster.yaml", yamlData)
	if err != nil {
		b.Fatal(err)
	}
	anys := make([]any, len(objs))
	for i, o := range objs {
		anys[i] = o.Obj
	}
	var jsonData bytes.Buffer
	for _, o := range anys {
		j, err := json.Marshal(o) // decoded objects carry their apiVersion and kind
		if err != nil {
			b.Fatal(err)
		}
		jsonData.Write(append(j, '\n'))
	}
	for _, in := range []struct {
		name string
		data []byte
	}{{"yaml", yamlData}, {"json", jsonData.Bytes()}} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			cpu0 := coretest.CPUTime()
			for b.Loop() {
				objs, err := Bytes("cluster."+in.name, in.data)
				if err != nil || len(objs) != 1000 {
					b.Fatalf("%d objects, %v", len(objs), err)
				}
			}
			// On a shared machine wall time says little; CPU time spent by
			// the process (all workers, GC included) is comparable.
			b.ReportMetric(float64(coretest.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(devices), "devices/op")
		})
	}
}
