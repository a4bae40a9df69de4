package e2e

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/core/decode"
)

// TestPodDefaultsAsStored: a pod file read by dractl is the pod
// kube-apiserver stores. The pods and nodes of testdata/pod-defaults.yaml
// (devices asked in limits only, init containers and sidecars, pod-level
// resources; nodes that state only their capacity) are created through
// the API server as written, without a client's defaults, and read back:
// the fields the verbs read are those dractl's decoding gives the file,
// and allocate and explain answer the same from the stored objects as
// from the file.
func TestPodDefaultsAsStored(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	ctx := cp.Context()
	file := filepath.Join("testdata", "pod-defaults.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	// As written: the universal deserializer applies no defaults, so the
	// server's are the only ones.
	deserializer := scheme.Codecs.UniversalDeserializer()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var stored []runtime.Object
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(raw.Raw) == "null" {
			continue
		}
		obj, _, err := deserializer.Decode(raw.Raw, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got runtime.Object
		switch o := obj.(type) {
		case *resourcev1.DeviceClass:
			got, err = cp.Client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
		case *resourcev1.ResourceSlice:
			got, err = cp.Client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Node:
			got, err = cp.Client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			var p *corev1.Pod
			if p, err = cp.Client.CoreV1().Pods("default").Create(ctx, o, metav1.CreateOptions{}); err == nil {
				got, err = cp.Client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			}
		default:
			t.Fatalf("%s: a %T, which the test does not create", file, obj)
		}
		if err != nil {
			t.Fatalf("creating %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, err)
		}
		stored = append(stored, got)
	}

	objs, err := decode.Paths([]string{file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := decode.Group(objs)
	pods := map[string]*corev1.Pod{}
	for _, p := range set.Pods {
		pods[p.Name] = p
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range set.Nodes {
		nodes[n.Name] = n
	}
	compared := 0
	for _, obj := range stored {
		switch o := obj.(type) {
		case *corev1.Pod:
			read := pods[o.Name]
			if read == nil {
				t.Fatalf("pod %s: not read from %s", o.Name, file)
			}
			comparePod(t, o, read)
			compared++
		case *corev1.Node:
			read := nodes[o.Name]
			if read == nil {
				t.Fatalf("node %s: not read from %s", o.Name, file)
			}
			if !equality.Semantic.DeepEqual(o.Status.Capacity, read.Status.Capacity) || !equality.Semantic.DeepEqual(o.Status.Allocatable, read.Status.Allocatable) {
				t.Errorf("node %s: stored capacity %v, allocatable %v; read %v, %v", o.Name, o.Status.Capacity, o.Status.Allocatable, read.Status.Capacity, read.Status.Allocatable)
			}
			compared++
		}
	}
	if compared != len(pods)+len(nodes) || len(pods) == 0 || len(nodes) == 0 {
		t.Fatalf("compared %d objects, want the file's %d pods and %d nodes", compared, len(pods), len(nodes))
	}

	// The stored objects as a file, as kubectl get -o yaml would give
	// them, but without the UIDs the server made up: a pod read without
	// one gets the one dractl derives, which its claims then name.
	var out bytes.Buffer
	for _, obj := range stored {
		if err := setTypeMeta(obj); err != nil {
			t.Fatal(err)
		}
		if m, ok := obj.(metav1.Object); ok {
			m.SetUID("")
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	storedFile := filepath.Join(t.TempDir(), "stored.yaml")
	if err := os.WriteFile(storedFile, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"allocate", "explain"} {
		want := dractl(t, "", verb, "-f", file)
		got := dractl(t, "", verb, "-f", storedFile)
		if want.code != 0 || got.code != 0 {
			t.Fatalf("%s: exit %d from the file, %d from the stored objects\n%s\n%s", verb, want.code, got.code, want.err, got.err)
		}
		if got.out != want.out || got.err != want.err {
			t.Errorf("%s answers differently from the stored objects:\n--- from the file\n%s%s\n--- stored\n%s%s", verb, want.out, want.err, got.out, got.err)
		}
	}
	// Every pod asks for devices in limits only: each gets its claim.
	if alloc := dractl(t, "", "allocate", "-f", storedFile); countClaims(t, alloc.out) != len(pods) {
		t.Errorf("allocate made %d claims for %d pods:\n%s", countClaims(t, alloc.out), len(pods), alloc.err)
	}
}

// comparePod compares what the verbs read of a pod: the resources of every
// container, init containers' restart policies, and the pod-level and
// overhead resources.
func comparePod(t *testing.T, stored, read *corev1.Pod) {
	t.Helper()
	type view struct {
		Init, Containers []corev1.ResourceRequirements
		RestartPolicies  []*corev1.ContainerRestartPolicy
		Resources        *corev1.ResourceRequirements
		Overhead         corev1.ResourceList
	}
	of := func(p *corev1.Pod) view {
		v := view{Resources: p.Spec.Resources, Overhead: p.Spec.Overhead}
		for _, c := range p.Spec.InitContainers {
			v.Init = append(v.Init, c.Resources)
			v.RestartPolicies = append(v.RestartPolicies, c.RestartPolicy)
		}
		for _, c := range p.Spec.Containers {
			v.Containers = append(v.Containers, c.Resources)
		}
		return v
	}
	if s, r := of(stored), of(read); !equality.Semantic.DeepEqual(s, r) {
		t.Errorf("pod %s: kube-apiserver stored\n  %+v\ndractl read\n  %+v", stored.Name, s, r)
	}
}

func setTypeMeta(obj runtime.Object) error {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	return nil
}

func countClaims(t *testing.T, manifest string) int {
	t.Helper()
	objs, err := decode.Bytes("allocate", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return len(decode.Group(objs).Claims)
}
