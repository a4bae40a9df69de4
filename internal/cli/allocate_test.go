package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dractl/dractl/pkg/core/decode"
)

func tpuInputs(claims ...string) []string {
	args := []string{
		"-f", filepath.Join("examples", "tpu-multihost", "resourceslices.yaml"),
		"-f", filepath.Join("examples", "tpu-multihost", "nodes.yaml"),
		"-f", filepath.Join("examples", "tpu-multihost", "deviceclass.yaml"),
	}
	for _, c := range claims {
		args = append(args, "-f", c)
	}
	return args
}

func allocTestdata(name string) string {
	return filepath.Join("internal", "cli", "testdata", "allocate", name)
}

// TestAllocateCommands pins the output and exit code of allocate and explain.
func TestAllocateCommands(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
	}{
		// KEP-4815's four-request MIG claim: non-overlapping partitions of one GPU.
		{"allocate-a100-mig-mixins", []string{"allocate", "-f", filepath.Join("examples", "a100-mig-mixins")}, ExitOK},
		{"allocate-dgx-h100-best-fit", []string{"allocate", "--strategy", "best-fit", "-o", "json", "-f", filepath.Join("examples", "dgx-h100-mixins")}, ExitOK},
		// The 4x4 spans four hosts: the result's node selector names them.
		{"allocate-tpu-4x4", append([]string{"allocate"}, tpuInputs(allocTestdata("tpu-4x4.yaml"))...), ExitOK},
		// Both example claims at once share the hosts' chip counters.
		{"allocate-tpu-both", []string{"allocate", "-f", filepath.Join("examples", "tpu-multihost")}, ExitInvalid},
		{"allocate-unknown-node", []string{"allocate", "--node", "nope", "-f", filepath.Join("examples", "gpu-partitions")}, ExitUsage},
		{"allocate-bad-strategy", []string{"allocate", "--strategy", "worst-fit", "-f", filepath.Join("examples", "gpu-partitions")}, ExitUsage},
		{"allocate-bad-selector", []string{"allocate", "-f", filepath.Join("examples", "dgx-h100-mixins", "resourceslices.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "deviceclasses.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "node.yaml"), "-f", allocTestdata("bad-selector.yaml")}, ExitUsage},
		{"explain-tpu-both", []string{"explain", "-f", filepath.Join("examples", "tpu-multihost"), "--node", "node-1"}, ExitOK},
		{"explain-dgx", []string{"explain", "-f", filepath.Join("examples", "dgx-h100-mixins"), "--claim", "mig-1g-10gb"}, ExitOK},
		{"explain-unknown-claim", []string{"explain", "-f", filepath.Join("examples", "dgx-h100-mixins"), "--claim", "nope"}, ExitUsage},
		// --feature-gates is read as kube-scheduler reads it.
		{"allocate-feature-gates-unknown", []string{"allocate", "--feature-gates", "DRAFoo=true", "-f", filepath.Join("examples", "gpu-partitions")}, ExitUsage},
		{"allocate-feature-gates-not-bool", []string{"allocate", "--feature-gates", "DRAAdminAccess=maybe", "-f", filepath.Join("examples", "gpu-partitions")}, ExitUsage},
		{"allocate-feature-gates-dependency", []string{"allocate", "--feature-gates", "DRAConsumableCapacity=false", "-f", filepath.Join("examples", "gpu-partitions")}, ExitUsage},
		// Without partitionable devices the MIG slices' counters are not
		// used and no partition can be allocated.
		{"explain-dgx-partitionable-off", []string{"explain", "--feature-gates", "DRAPartitionableDevices=false,DRADeviceCompatibilityGroups=false", "-f", filepath.Join("examples", "dgx-h100-mixins"), "--claim", "mig-1g-10gb"}, ExitOK},
		// Without mixins every device of the DGX's slices that includes one
		// is left out (KEP-5234 "Implementation"), and nothing fits.
		{"explain-dgx-mixins-off", []string{"explain", "--feature-gates", "DRAResourceSliceMixins=false", "-f", filepath.Join("examples", "dgx-h100-mixins"), "--claim", "mig-1g-10gb"}, ExitOK},
		// A counter too large to compute with ends at once, as an invalid pool.
		{"allocate-huge-counter", []string{"allocate", "-f", allocTestdata("huge-counter.yaml")}, ExitCannotAnswer},
		// A pod's claims, one made from a template, on a node its
		// nodeSelector allows.
		{"allocate-pod-template", []string{"allocate", "-f", inputFile("pod.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins")}, ExitOK},
		// The A100 node does not match the pod's nodeSelector.
		{"allocate-pod-excluded", []string{"allocate", "-f", inputFile("pod.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "resourceslices.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "deviceclasses.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins", "claim.yaml"), "-f", filepath.Join("examples", "a100-mig-mixins", "node.yaml")}, ExitNoFit},
		{"explain-pod-json", []string{"explain", "-o", "json", "-f", inputFile("pod.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins")}, ExitOK},
		{"explain-pod-yaml", []string{"explain", "-o", "yaml", "-f", inputFile("pod.yaml"), "-f", filepath.Join("examples", "dgx-h100-mixins")}, ExitOK},
		{"explain-bad-input-json", []string{"explain", "-o", "json", "-f", filepath.Join("internal", "cli", "testdata", "bad", "bad-claim.yaml")}, ExitCannotAnswer},
		// Older API versions, and nodes taken from the slices.
		{"allocate-v1beta1-no-nodes", []string{"allocate", "-f", inputFile("v1beta1.yaml")}, ExitOK},
		{"allocate-named-node-no-nodes", []string{"allocate", "--node", "node-1", "-f", inputFile("v1beta1.yaml")}, ExitOK},
		{"explain-tpu-no-nodes", []string{"explain", "-f", filepath.Join("examples", "tpu-multihost", "resourceslices.yaml"), "-f", filepath.Join("examples", "tpu-multihost", "deviceclass.yaml"), "-f", allocTestdata("tpu-2x4.yaml"), "--node", "node-1"}, ExitOK},
		// Two pods share a claim: allocated for the first, reserved for both.
		{"allocate-shared-claim", append([]string{"allocate"}, tpuInputs(allocTestdata("tpu-2x4.yaml"), allocTestdata("shared-claim-pods.yaml"))...), ExitOK},
		// One pod fits nowhere; the other is still allocated (exit 1).
		{"allocate-independent-pods", []string{"allocate", "-f", filepath.Join("examples", "dgx-h100-mixins"), "-f", allocTestdata("independent-pods.yaml")}, ExitNoFit},
		// Extended resources backed by DRA (KEP-5004): the claim
		// kube-scheduler would create per pod, on the node whose devices
		// serve it; a node's device plugins take precedence.
		{"allocate-extended-resources", []string{"allocate", "-f", allocTestdata("extended-resources.yaml")}, ExitOK},
		{"explain-extended-resources", []string{"explain", "-f", allocTestdata("extended-resources.yaml")}, ExitOK},
		// Asked in limits only, as GPU pods ask: requests default to them.
		{"allocate-extended-limits", []string{"allocate", "-f", allocTestdata("extended-limits.yaml")}, ExitOK},
		{"explain-extended-limits", []string{"explain", "-f", allocTestdata("extended-limits.yaml")}, ExitOK},
		{"explain-pod-extended-limits", []string{"explain", "pod/gpu-pod", "-f", allocTestdata("extended-limits.yaml")}, ExitOK},
		// A DeviceTaintRule taints a device as the scheduler plugin sees
		// it: allocate takes another, explain names the tainted one.
		{"allocate-taint-rule", []string{"allocate", "-f", filepath.Join("examples", "gpu-partitions"), "-f", allocTestdata("taint-rule.yaml")}, ExitOK},
		{"explain-taint-rule", []string{"explain", "-f", filepath.Join("examples", "gpu-partitions", "resourceslices.yaml"), "-f", filepath.Join("examples", "gpu-partitions", "deviceclass.yaml"), "-f", filepath.Join("examples", "gpu-partitions", "node.yaml"), "-f", allocTestdata("four-partitions.yaml"), "-f", allocTestdata("taint-rule.yaml")}, ExitOK},
		{"allocate-duplicate-claim", []string{"allocate", "-f", allocTestdata("tpu-2x4.yaml"), "-f", allocTestdata("tpu-2x4.yaml"), "-f", filepath.Join("examples", "tpu-multihost")}, ExitCannotAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("dractl %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.code, r)
			}
			golden(t, tc.name, "$ dractl "+strings.Join(tc.args, " ")+"\n"+r.String())
		})
	}
}

// TestAllocateFeedBack feeds allocate's output back in: the devices of an
// allocated claim, and the counters they consume, are then in use.
func TestAllocateFeedBack(t *testing.T) {
	first := run(t, "", append([]string{"allocate"}, tpuInputs(allocTestdata("tpu-4x4.yaml"))...)...)
	if first.code != ExitOK {
		t.Fatalf("first allocation failed:\n%s", first)
	}
	claim := onlyClaim(t, first.stdout)
	if got := claim.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values; !slices.Equal(got, []string{"node-1", "node-2", "node-5", "node-6"}) {
		t.Errorf("4x4 node selector values = %v, want the four hosts", got)
	}
	// Every host's chips are taken by the 4x4, so no 2x4 fits anywhere.
	second := run(t, first.stdout, append([]string{"allocate", "-f", "-"}, tpuInputs(allocTestdata("tpu-2x4.yaml"))...)...)
	if second.code != ExitInvalid {
		t.Fatalf("2x4 next to an allocated 4x4: exit %d, want %d\n%s", second.code, ExitInvalid, second)
	}
	if !strings.Contains(second.stderr, "CounterExhausted") {
		t.Errorf("explanation does not name exhausted counters:\n%s", second.stderr)
	}

	// Two 2x4 claims, one after the other, land on the two host pairs.
	a := run(t, "", append([]string{"allocate"}, tpuInputs(allocTestdata("tpu-2x4.yaml"))...)...)
	if a.code != ExitOK {
		t.Fatalf("first 2x4: %s", a)
	}
	other := strings.ReplaceAll(readFile(t, allocTestdata("tpu-2x4.yaml")), "tpu-2x4-b", "tpu-2x4-c")
	b := run(t, a.stdout+"---\n"+other, append([]string{"allocate", "-f", "-"}, tpuInputs()...)...)
	if b.code != ExitOK {
		t.Fatalf("second 2x4: %s", b)
	}
	d1 := onlyClaim(t, a.stdout).Status.Allocation.Devices.Results[0].Device
	d2 := onlyClaim(t, b.stdout).Status.Allocation.Devices.Results[0].Device
	if d1 == d2 || !strings.HasPrefix(d1, "tpu-2x4-") || !strings.HasPrefix(d2, "tpu-2x4-") {
		t.Errorf("two 2x4 claims got %s and %s, want the two different 2x4 devices", d1, d2)
	}
}

// TestAllocateFlatAndMixinsAgree: mixins change how devices are written,
// never which are picked.
func TestAllocateFlatAndMixinsAgree(t *testing.T) {
	flat := run(t, "", "allocate", "-f", filepath.Join("examples", "a100-mig-flat"))
	mix := run(t, "", "allocate", "-f", filepath.Join("examples", "a100-mig-mixins"))
	if flat.code != ExitOK || mix.code != ExitOK {
		t.Fatalf("flat: %s\nmixins: %s", flat, mix)
	}
	if flat.stdout != mix.stdout {
		t.Errorf("flat and mixin forms allocate differently:\n%s", diff(flat.stdout, mix.stdout))
	}
	// KEP-4815 "Dynamic allocation of Multi-Instance GPUs": the four
	// partitions share a GPU and no memory slice.
	res := onlyClaim(t, mix.stdout).Status.Allocation.Devices.Results
	got := make([]string, len(res))
	for i, r := range res {
		got[i] = r.Device
	}
	want := []string{"gpu-0-mig-1g-5gb-0", "gpu-0-mig-1g-5gb-1", "gpu-0-mig-2g-10gb-2", "gpu-0-mig-3g-20gb-4"}
	if !slices.Equal(got, want) {
		t.Errorf("devices = %v, want %v", got, want)
	}
}

func onlyClaim(t *testing.T, manifest string) *resourcev1.ResourceClaim {
	t.Helper()
	objs, err := decode.Bytes("stdout", []byte(manifest))
	if err != nil || len(objs) != 1 {
		t.Fatalf("want one claim in output, got %d objects, err %v:\n%s", len(objs), err, manifest)
	}
	c, ok := objs[0].Obj.(*resourcev1.ResourceClaim)
	if !ok || c.Status.Allocation == nil {
		t.Fatalf("output is not an allocated claim: %#v", objs[0].Obj)
	}
	return c
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAllocateAndExplainPodNameOneClaim: a pod whose template claim the
// resourceclaim controller has not created yet gets one name from every
// verb, the name allocate prints being the one explain pod reports.
func TestAllocateAndExplainPodNameOneClaim(t *testing.T) {
	in := []string{"-f", filepath.Join("examples", "gpu-partitions"), "-f", filepath.Join("internal", "cli", "testdata", "explainpod")}
	alloc := run(t, "", append([]string{"allocate", "-o", "json"}, in...)...)
	if alloc.code != ExitOK {
		t.Fatalf("allocate: exit %d\n%s", alloc.code, alloc)
	}
	objs, err := decode.Bytes("allocate", []byte(alloc.stdout))
	if err != nil {
		t.Fatal(err)
	}
	var made string
	for _, o := range objs {
		if c, ok := o.Obj.(*resourcev1.ResourceClaim); ok && c.Annotations[resourcev1.PodResourceClaimAnnotation] == "gpus" {
			made = c.Name
		}
	}
	if !strings.HasPrefix(made, "waiting-gpus-") {
		t.Fatalf("allocate made no claim for pod waiting's entry gpus (found %q):\n%s", made, alloc.stdout)
	}
	explain := run(t, "", append([]string{"explain", "pod/waiting"}, in...)...)
	if explain.code != ExitOK {
		t.Fatalf("explain pod: exit %d\n%s", explain.code, explain)
	}
	if want := "gpus: ResourceClaim default/" + made + " "; !strings.Contains(explain.stdout, want) {
		t.Errorf("explain pod does not name the claim allocate made (%q):\n%s", want, explain.stdout)
	}
}

// TestAllocateOutputReadsBack: what allocate prints reads back as it
// promises. The claims it makes for a pod read without a UID name the UID
// the pod gets when it is read (decode.PodUID), in their ownerReferences
// and reservedFor; the output validates; describe shows the devices held;
// and allocate, given the pod and its output, has nothing left to do. A
// pod with a UID of its own is named by it.
func TestAllocateOutputReadsBack(t *testing.T) {
	dgx := filepath.Join("examples", "dgx-h100-mixins")
	cluster := []string{"-f", filepath.Join(dgx, "resourceslices.yaml"), "-f", filepath.Join(dgx, "deviceclasses.yaml"), "-f", filepath.Join(dgx, "node.yaml")}
	pod := readFile(t, inputFile("pod.yaml"))
	withUID := strings.Replace(pod, "  name: trainer\n", "  name: trainer\n  uid: 5a3f0e7c-9d1b-4c2a-8e6f-0b1d2c3e4f50\n", 1)
	for _, tc := range []struct {
		name, pod string
		uid       types.UID
	}{
		{"no uid", pod, decode.PodUID("default", "trainer")},
		{"uid", withUID, "5a3f0e7c-9d1b-4c2a-8e6f-0b1d2c3e4f50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := run(t, tc.pod, append([]string{"allocate", "-f", "-", "-f", filepath.Join(dgx, "claim.yaml")}, cluster...)...)
			if alloc.code != ExitOK {
				t.Fatalf("allocate: %s", alloc)
			}
			objs, err := decode.Bytes("allocate", []byte(alloc.stdout))
			if err != nil || len(objs) != 2 {
				t.Fatalf("want the pod's two claims, got %d objects, err %v", len(objs), err)
			}
			for _, o := range objs {
				c := o.Obj.(*resourcev1.ResourceClaim)
				for _, ref := range c.OwnerReferences {
					if ref.UID != tc.uid {
						t.Errorf("claim %s: ownerReferences uid %q, want %q", c.Name, ref.UID, tc.uid)
					}
				}
				for _, ref := range c.Status.ReservedFor {
					if ref.UID != tc.uid {
						t.Errorf("claim %s: reservedFor uid %q, want %q", c.Name, ref.UID, tc.uid)
					}
				}
			}
			if v := run(t, alloc.stdout, "validate", "-f", "-"); v.code != ExitOK {
				t.Errorf("validate of allocate's output:\n%s", v)
			}
			d := run(t, alloc.stdout, append([]string{"describe", "node", "dgx-h100-node", "-f", "-"}, cluster...)...)
			if d.code != ExitOK || !strings.Contains(d.stdout, "Devices:  152: 2 held") {
				t.Errorf("describe node with allocate's output does not show its 2 devices held:\n%s", d)
			}
			again := run(t, alloc.stdout+"---\n"+tc.pod, append([]string{"allocate", "-f", "-"}, cluster...)...)
			if again.code != ExitOK || !strings.Contains(again.stderr, "no pending ResourceClaims") || again.stdout != "" {
				t.Errorf("allocate of the pod with its allocated claims:\n%s", again)
			}
		})
	}
}
