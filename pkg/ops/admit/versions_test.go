package admit

import (
	"slices"
	"strings"
	"testing"

	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/validation"
)

// pciRootSlice is valid for kube-apiserver 1.37, which stores an attribute
// name with two slashes, and refused by 1.38.
const pciRootSlice = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-nics
spec:
  driver: nic.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: nic-0
    attributes:
      example.net/pci/root: {string: "pci0000:00"}
`

func decodeDocs(t *testing.T, docs ...string) []decode.Object {
	t.Helper()
	objs, err := decode.Bytes("in.yaml", []byte(strings.Join(docs, "---\n")))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return objs
}

// TestReviewVerdicts: without a named minor, an input the supported
// minors judge differently is reported with each verdict, and the error
// names the minors that make it; with one, only that minor's verdict.
func TestReviewVerdicts(t *testing.T) {
	objs := decodeDocs(t, pciRootSlice)
	r := Review(objs, nil)
	if r.Valid || r.Summary.Errors != 1 {
		t.Fatalf("Review: valid %v, %d errors; want invalid with 1 error: %+v", r.Valid, r.Summary.Errors, r.Problems)
	}
	want := []Verdict{{KubeVersion: "1.37", Valid: true}, {KubeVersion: "1.38", Errors: 1}}
	if !slices.Equal(r.Verdicts, want) {
		t.Errorf("Verdicts = %+v, want %+v", r.Verdicts, want)
	}
	p := r.Problems[0]
	if !slices.Equal(p.RefusedBy, []string{"1.38"}) || !strings.HasSuffix(p.Text, "must not contain more than one slash (kube-apiserver 1.38; 1.37 accepts it)") {
		t.Errorf("problem: refusedBy %v, text %q", p.RefusedBy, p.Text)
	}

	r37 := ReviewAt(validation.KubeVersion{Minor: 37}, objs, nil)
	if !r37.Valid || r37.KubeVersion != "1.37" || len(r37.Problems) != 0 || r37.Verdicts != nil {
		t.Errorf("ReviewAt(1.37) = valid %v, version %q, problems %+v, verdicts %+v; want valid for 1.37 alone", r37.Valid, r37.KubeVersion, r37.Problems, r37.Verdicts)
	}
	r38 := ReviewAt(validation.KubeVersion{Minor: 38}, objs, nil)
	if r38.Valid || len(r38.Problems) != 1 || r38.Problems[0].RefusedBy != nil || strings.Contains(r38.Problems[0].Text, "accepts it") {
		t.Errorf("ReviewAt(1.38) = valid %v, problems %+v; want one error without other minors' words", r38.Valid, r38.Problems)
	}
}

// TestReviewVerdictsAgree: an input every minor refuses alike gets no
// verdicts, and its errors name no minor.
func TestReviewVerdictsAgree(t *testing.T) {
	bad := strings.Replace(pciRootSlice, "example.net/pci/root", "bad name", 1)
	r := Review(decodeDocs(t, bad), nil)
	if r.Valid || r.Verdicts != nil || r.Problems[0].RefusedBy != nil {
		t.Errorf("Review = valid %v, verdicts %+v, problems %+v; want invalid, no verdicts", r.Valid, r.Verdicts, r.Problems)
	}
}
