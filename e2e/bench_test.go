package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/ops/monitor"
)

// benchNodes is how many DGX H100 nodes the benchmarks publish;
// E2E_BENCH_NODES overrides the 1,000 of the target.
func benchNodes(b *testing.B) int {
	n := 1000
	if s := os.Getenv("E2E_BENCH_NODES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// publishDGX publishes n copies of the DGX H100 example (flattened: 5
// slices, 152 devices, 8 counter sets each) as nodes dgx-0000, dgx-0001,
// ... through the API server, with 8 writers in parallel.
func publishDGX(b testing.TB, cp *framework.ControlPlane, n int) {
	objs, err := decode.Paths([]string{filepath.Join(repo, "examples", "dgx-h100-mixins", "resourceslices.yaml")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var flat []*resourcev1.ResourceSlice
	for _, s := range decode.Group(objs).Slices {
		v1, err := api.ToUpstream(s)
		if err != nil {
			b.Fatal(err)
		}
		flat = append(flat, v1)
	}
	const original = "dgx-h100-node"
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				node := fmt.Sprintf("dgx-%04d", i)
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}
				if _, err := cp.Client.CoreV1().Nodes().Create(cp.Context(), n, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				for _, s := range flat {
					c := s.DeepCopy()
					c.Name = strings.Replace(c.Name, original, node, 1)
					c.Spec.Pool.Name = node
					c.Spec.NodeName = ptr.To(node)
					if _, err := cp.Client.ResourceV1().ResourceSlices().Create(cp.Context(), c, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkLive1000Nodes measures what a user waits for on a cluster of
// DGX H100 nodes (E2E_BENCH_NODES, default 1,000) through the real API
// server: get pools and describe node end to end (kubeconfig, paged
// protobuf lists, State, output), the monitor's memory, and how long a
// slice change takes to show in the monitor's metrics.
func BenchmarkLive1000Nodes(b *testing.B) {
	n := benchNodes(b)
	cp := framework.StartControlPlane(b, framework.Options{})
	publishDGX(b, cp, n)
	kc := cp.Kubeconfig(nil)

	// The verbs run as the user runs them: the dractl binary in its own
	// process (its own heap and GC, not the API server's).
	bin := filepath.Join(b.TempDir(), "dractl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dractl")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	// run runs dractl once and returns the CPU time its process used: on
	// a shared machine the wall time also counts other processes.
	// Its allocations are what it writes to $DRACTL_MEMSTATS on exit.
	stats := filepath.Join(b.TempDir(), "memstats")
	type usage struct {
		cpu            time.Duration
		mallocs, bytes float64
	}
	run := func(b *testing.B, want string, args ...string) usage {
		cmd := exec.Command(bin, append(args, "--kubeconfig", kc)...)
		cmd.Env = append(os.Environ(), "DRACTL_MEMSTATS="+stats)
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), want) {
			b.Fatalf("dractl %v: %v\n%.2000s", args, err, out)
		}
		u := usage{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
		raw, err := os.ReadFile(stats)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fmt.Sscanf(string(raw), "mallocs %g\nbytes %g\n", &u.mallocs, &u.bytes); err != nil {
			b.Fatalf("%s: %v", stats, err)
		}
		return u
	}
	verb := func(want string, args ...string) func(b *testing.B) {
		return func(b *testing.B) {
			var sum usage
			for b.Loop() {
				u := run(b, want, args...)
				sum.cpu += u.cpu
				sum.mallocs += u.mallocs
				sum.bytes += u.bytes
			}
			b.ReportMetric(sum.cpu.Seconds()/float64(b.N), "dractl-cpu-s/op")
			b.ReportMetric(sum.mallocs/float64(b.N), "dractl-allocs/op")
			b.ReportMetric(sum.bytes/float64(b.N)/(1<<20), "dractl-MiB/op")
		}
	}
	b.Run("get-pools", verb(fmt.Sprintf("dgx-%04d", n-1), "get", "pools"))
	// kubectl's --disable-compression: on a loopback or LAN link the API
	// server's gzip of every page costs more than the bytes it saves.
	b.Run("get-pools-uncompressed", verb(fmt.Sprintf("dgx-%04d", n-1), "get", "pools", "--disable-compression"))
	b.Run("describe-node", verb("gpu.nvidia.com/dgx-0000", "describe", "node", "dgx-0000"))
	b.Run("monitor-slice-to-metric", func(b *testing.B) {
		// dractl monitor in its own process, as it is deployed. A loop
		// changes a slice and reads the device-count family
		// (/metrics?name[]=…, a thousand lines) every 5 ms until the pool
		// shows the change: the time measured is the monitor's (the watch
		// event, the pool recomputed, its series rendered) to within 5 ms.
		// A full scrape of every pool's series is measured apart
		// (full-scrape-s), and the monitor's memory once it is ready: the
		// heap its last collection kept and its resident set.
		addr := freeAddress(b)
		mon := exec.Command(bin, "monitor", "--kubeconfig", kc, "--leader-elect=false", "--metrics-bind-address", addr)
		mon.Stderr = os.Stderr
		if err := mon.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = mon.Process.Kill(); _ = mon.Wait() })
		base := "http://" + addr
		deadline := time.Now().Add(5 * time.Minute)
		for code, _ := get(base + "/readyz"); code != http.StatusOK; code, _ = get(base + "/readyz") {
			if time.Now().After(deadline) {
				b.Fatal("dractl monitor not ready after 5 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		heap, rss := processMemory(b, base)
		ctx := cp.Context()
		slices := cp.Client.ResourceV1().ResourceSlices()
		name := "dgx-0001-gpu-0-1"
		labels := `driver="gpu.nvidia.com",pool="dgx-0001"`
		s, err := slices.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cpuBefore := processCPU(b, base)
		i := 0
		for b.Loop() {
			// Drop the slice's last device, or put it back: the pool's
			// device count alternates between 151 and 152.
			want := "151"
			if i%2 == 0 {
				s.Spec.Devices = s.Spec.Devices[:len(s.Spec.Devices)-1]
			} else {
				s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "extra"})
				want = "152"
			}
			i++
			if s, err = slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			for {
				got, err := seriesValue(base+"/metrics?name[]="+monitor.MetricDevices, monitor.MetricDevices, labels)
				if err != nil {
					b.Fatal(err)
				}
				if got == want {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		b.StopTimer()
		cpu := processCPU(b, base) - cpuBefore
		start := time.Now()
		if v := metric(b, base, monitor.MetricDevices, labels); v == "" {
			b.Fatal("a full scrape lacks the pool's series")
		}
		b.ReportMetric(time.Since(start).Seconds(), "full-scrape-s")
		b.ReportMetric(cpu/float64(b.N), "monitor-cpu-s/op")
		b.ReportMetric(heap*1000/float64(n), "MiB-heap/1000nodes")
		b.ReportMetric(rss*1000/float64(n), "MiB-rss/1000nodes")
	})
}

// freeAddress returns a loopback address with a port free a moment ago.
func freeAddress(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// seriesValue reads a metrics page (url), uncompressed, up to the series
// with exactly these labels (none: "") and returns its value ("" if there
// is none).
func seriesValue(url, name, labels string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	prefix := name + " "
	if labels != "" {
		prefix = name + "{" + labels + "} "
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v, nil
		}
	}
	return "", sc.Err()
}

// processCPU is the CPU time a monitor reports it has used.
func processCPU(b *testing.B, base string) float64 {
	return gauge(b, base, "process_cpu_seconds_total")
}

// processMemory is a monitor's heap kept by its last garbage collection
// and its resident set, in MiB.
func processMemory(b *testing.B, base string) (heap, rss float64) {
	return gauge(b, base, "go_gc_heap_live_bytes") / (1 << 20), gauge(b, base, "process_resident_memory_bytes") / (1 << 20)
}

// gauge reads one unlabelled series of a monitor's metrics.
func gauge(b *testing.B, base, name string) float64 {
	s, err := seriesValue(base+"/metrics?name[]="+name, name, "")
	if err != nil {
		b.Fatal(err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		b.Fatalf("%s = %q: %v", name, s, err)
	}
	return v
}
