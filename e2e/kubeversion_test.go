package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/pkg/ops/admit"
)

// kubeVersionInputs are the files TestKubeVersionVerdicts judges: the
// cases of the rules that differ between minors, the CLI's golden input
// of them, the CLI's invalid inputs and the examples without mixins.
var kubeVersionInputs = []string{
	"testdata/kube-version-cases.yaml",
	repo + "/internal/cli/testdata/kube-versions.yaml",
	repo + "/internal/cli/testdata/bad/bad-claim.yaml",
	repo + "/internal/cli/testdata/bad/bad-quantity.yaml",
	repo + "/internal/cli/testdata/bad/devices-and-counters.yaml",
	repo + "/internal/cli/testdata/bad/duplicate-device.yaml",
	repo + "/internal/cli/testdata/bad/incomplete-pool.yaml",
	repo + "/internal/cli/testdata/bad/missing-counter-set.yaml",
	repo + "/internal/cli/testdata/bad/unknown-field.yaml",
	repo + "/examples/a100-mig-flat",
	repo + "/examples/gpu-partitions",
	repo + "/examples/tpu-multihost",
}

// A judged object: one document of an input, as kube-apiserver gets it.
type judged struct {
	input, kind, name, namespace string
	doc                          json.RawMessage
}

// verdictOf is one judge's word on an object: accepted, or refused at
// these fields (nil when the refusal names none, as a decoding error of a
// quantity does).
type verdictOf struct {
	accepted bool
	fields   []string
}

func (v verdictOf) String() string {
	if v.accepted {
		return "accepted"
	}
	return fmt.Sprintf("refused at %v", v.fields)
}

// TestKubeVersionVerdicts creates every object of kubeVersionInputs in a
// real kube-apiserver 1.37.2 (server-side dry run, strict field
// validation, as kubectl creates) and judges the same documents with
// `dractl validate --kube-version 1.37`: each object must be accepted by
// both or refused by both, at the same fields. Pool problems are dractl's
// own (kube-apiserver checks objects one by one) and are left out. The
// matrix (matrix_test.go) does the same against kube-apiserver 1.38.
func TestKubeVersionVerdicts(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{})
	judgeKubeVersion(t, cp.Context(), cp.Client, "1.37")
}

// judgeKubeVersion compares, for every object of kubeVersionInputs, the
// verdict of the kube-apiserver behind client with that of
// `dractl validate --kube-version minor`.
func judgeKubeVersion(t *testing.T, ctx context.Context, client kubernetes.Interface, minor string) {
	// Admission takes a slice with nodeAllocatableResources only for a node
	// that declares the feature, as its kubelet would; it reads the node
	// from an informer, so the probe waits for it to see the declaration.
	if err := createNode(ctx, client, "node-1"); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Status.DeclaredFeatures, "DRANodeAllocatableResources") {
		n.Status.DeclaredFeatures = append(n.Status.DeclaredFeatures, "DRANodeAllocatableResources")
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rest := client.ResourceV1().RESTClient()
	probe := []byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"probe"},"spec":{"driver":"gpu.example.com","nodeName":"node-1",` +
		`"pool":{"name":"probe","generation":1,"resourceSliceCount":1},"devices":[{"name":"gpu-0","capacity":{"memory":{"value":"1Gi"}},` +
		`"nodeAllocatableResources":{"memory":{"mapping":{"capacityKey":"memory","capacityMultiplier":"1"}}}}]}}`)
	waitFor(t, 30*time.Second, "admission to see node-1's declared features", func(ctx context.Context) (bool, error) {
		err := rest.Post().Resource("resourceslices").Body(probe).SetHeader("Content-Type", "application/json").Param("dryRun", "All").Do(ctx).Error()
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	var files []string
	for _, in := range kubeVersionInputs {
		if fi, err := os.Stat(in); err == nil && fi.IsDir() {
			yamls, err := filepath.Glob(filepath.Join(in, "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, yamls...)
			continue
		}
		files = append(files, in)
	}
	counts := map[bool]int{}
	for _, file := range files {
		objs := readJudged(t, file)
		if len(objs) == 0 {
			continue
		}
		// dractl reads exactly the documents kube-apiserver gets.
		copyPath := filepath.Join(t.TempDir(), filepath.Base(file))
		var stream []string
		for _, o := range objs {
			stream = append(stream, string(o.doc))
		}
		if err := os.WriteFile(copyPath, []byte(strings.Join(stream, "\n---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		byDoc := dractlVerdicts(t, copyPath, len(objs), minor)
		for i, o := range objs {
			res := resourceOf(o.kind)
			req := rest.Post().Resource(res).Body([]byte(o.doc)).SetHeader("Content-Type", "application/json").
				Param("dryRun", "All").Param("fieldValidation", "Strict")
			if o.namespace != "" {
				req = req.Namespace(o.namespace)
			}
			err := req.Do(ctx).Error()
			server := serverVerdict(err)
			if err != nil {
				t.Logf("%s %s/%s: kube-apiserver: %v", file, o.kind, o.name, err)
			}
			dractl := byDoc[i+1]
			counts[server.accepted]++
			t.Logf("%s %s/%s: kube-apiserver %s; dractl %s", file, o.kind, o.name, server, dractl)
			if server.accepted != dractl.accepted ||
				(!server.accepted && server.fields != nil && !slices.Equal(server.fields, asServerReports(dractl.fields, server.fields))) {
				t.Errorf("%s %s/%s: kube-apiserver %s %s, dractl validate --kube-version %s %s", file, o.kind, o.name, minor, server, minor, dractl)
			}
		}
	}
	// The inputs hold both verdicts, so that agreeing is not agreeing on
	// everything.
	if counts[true] < 10 || counts[false] < 10 {
		t.Errorf("%d objects accepted and %d refused by kube-apiserver; the inputs should hold at least 10 of each", counts[true], counts[false])
	}
}

// readJudged reads the resource.k8s.io/v1 objects of a file as JSON
// documents, leaving out what kube-apiserver does not know: other kinds
// (Nodes, Pods), and documents with KEP-5234 mixins, which dractl reads
// ahead of the server.
func readJudged(t *testing.T, file string) []judged {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []judged
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(doc) == 0 || string(doc) == "null" {
			continue // a document of comments only
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if head.APIVersion != "resource.k8s.io/v1" || strings.Contains(string(doc), `"mixins"`) || strings.Contains(string(doc), `"includes"`) {
			continue
		}
		ns := head.Metadata.Namespace
		if ns == "" && (head.Kind == "ResourceClaim" || head.Kind == "ResourceClaimTemplate") {
			ns = "default"
		}
		out = append(out, judged{input: file, kind: head.Kind, name: head.Metadata.Name, namespace: ns, doc: doc})
	}
}

func resourceOf(kind string) string {
	if kind == "DeviceClass" {
		return "deviceclasses"
	}
	return strings.ToLower(kind) + "s"
}

// asServerReports writes dractl's fields as kube-apiserver reports them:
// a map key that is no valid name kube-apiserver reports at the map (its
// validateMap checks keys with the map's path), dractl at the key
// (spec.devices[0].attributes[Example_Net/root]), which names the key.
// That is the one difference allowed.
func asServerReports(dractl, server []string) []string {
	out := make([]string, 0, len(dractl))
	for _, d := range dractl {
		if i := strings.LastIndex(d, "["); !slices.Contains(server, d) && i > 0 && strings.HasSuffix(d, "]") {
			key := d[i+1 : len(d)-1]
			if strings.Trim(key, "0123456789") != "" && slices.Contains(server, d[:i]) {
				d = d[:i]
			}
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unknownField is how kube-apiserver's strict decoding names a field.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// serverVerdict reads kube-apiserver's answer: the causes of a refusal
// are its fields; a strict decoding error names the unknown field.
func serverVerdict(err error) verdictOf {
	if err == nil {
		return verdictOf{accepted: true}
	}
	var v verdictOf
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return verdictOf{fields: []string{"(no answer: " + err.Error() + ")"}}
	}
	if d := se.ErrStatus.Details; d != nil && len(d.Causes) > 0 {
		for _, c := range d.Causes {
			if m := unknownField.FindStringSubmatch(c.Message); m != nil && c.Field == "" {
				v.fields = append(v.fields, m[1])
				continue
			}
			v.fields = append(v.fields, c.Field)
		}
	} else if m := unknownField.FindAllStringSubmatch(se.ErrStatus.Message, -1); m != nil {
		for _, f := range m {
			v.fields = append(v.fields, f[1])
		}
	}
	slices.Sort(v.fields)
	v.fields = slices.Compact(v.fields)
	return v
}

// dractlVerdicts runs `dractl validate --kube-version <minor> -o json` on
// a file of n documents and returns each document's verdict (1-based).
func dractlVerdicts(t *testing.T, file string, n int, minor string) map[int]verdictOf {
	t.Helper()
	r := dractl(t, "", "validate", "--kube-version", minor, "-o", "json", "-f", file)
	if r.code != 0 && r.code != 1 {
		t.Fatalf("dractl validate %s: exit %d\n%s%s", file, r.code, r.out, r.err)
	}
	var rep admit.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("dractl validate %s: %v\n%s", file, err, r.out)
	}
	if rep.KubeVersion != minor {
		t.Fatalf("dractl validate judged for %q, want %s", rep.KubeVersion, minor)
	}
	out := map[int]verdictOf{}
	for d := 1; d <= n; d++ {
		out[d] = verdictOf{accepted: true}
	}
	for _, p := range rep.Problems {
		if p.Severity != "error" || p.Pool != "" {
			continue
		}
		v := out[p.Document]
		v.accepted = false
		if p.Field != "" {
			v.fields = append(v.fields, p.Field)
		}
		out[p.Document] = v
	}
	for d, v := range out {
		slices.Sort(v.fields)
		v.fields = slices.Compact(v.fields)
		out[d] = v
	}
	return out
}
