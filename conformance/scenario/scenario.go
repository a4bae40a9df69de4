// Package scenario holds one differential-test input: nodes, device classes,
// ResourceSlices (dractl form, possibly with KEP-5234 mixins), claims that are
// already allocated and claims to allocate. It reads and writes scenarios as
// multi-document YAML so that failing cases can become regression tests.
package scenario

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/core/api"
)

// Scenario is one cluster state plus the claims of one scheduling attempt.
type Scenario struct {
	// Name identifies the scenario, e.g. "seed-1-42".
	Name      string
	Nodes     []*corev1.Node
	Classes   []*resourcev1.DeviceClass
	Slices    []*api.ResourceSlice
	Allocated []*resourcev1.ResourceClaim // with status.allocation
	Claims    []*resourcev1.ResourceClaim // to allocate, in this order
}

// V1Slices flattens mixins and converts to the upstream type.
func (s *Scenario) V1Slices() ([]*resourcev1.ResourceSlice, error) {
	out := make([]*resourcev1.ResourceSlice, 0, len(s.Slices))
	for _, sl := range s.Slices {
		v, err := api.ToUpstream(sl)
		if err != nil {
			return nil, fmt.Errorf("slice %s: %w", sl.Name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// UsesMixins reports whether any slice uses KEP-5234 fields.
func (s *Scenario) UsesMixins() bool {
	for _, sl := range s.Slices {
		if sl.UsesMixins() {
			return true
		}
	}
	return false
}

// Node returns the node with that name, or nil.
func (s *Scenario) Node(name string) *corev1.Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// DeepCopy copies everything.
func (s *Scenario) DeepCopy() *Scenario {
	out := &Scenario{Name: s.Name}
	for _, n := range s.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, c := range s.Classes {
		out.Classes = append(out.Classes, c.DeepCopy())
	}
	for _, sl := range s.Slices {
		out.Slices = append(out.Slices, sl.DeepCopy())
	}
	for _, c := range s.Allocated {
		out.Allocated = append(out.Allocated, c.DeepCopy())
	}
	for _, c := range s.Claims {
		out.Claims = append(out.Claims, c.DeepCopy())
	}
	return out
}

// Marshal writes the scenario as multi-document YAML. header lines are
// written as comments first (without the leading "# ").
func (s *Scenario) Marshal(header []string) ([]byte, error) {
	var b bytes.Buffer
	for _, h := range header {
		for _, l := range strings.Split(h, "\n") {
			b.WriteString("# " + l + "\n")
		}
	}
	emit := func(obj any) error {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
		return nil
	}
	for _, n := range s.Nodes {
		n := n.DeepCopy()
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		// Nodes carry only metadata here; drop the zero spec and status.
		if err := emit(map[string]any{"apiVersion": n.APIVersion, "kind": n.Kind, "metadata": n.ObjectMeta}); err != nil {
			return nil, err
		}
	}
	for _, c := range s.Classes {
		c := c.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: api.APIVersion, Kind: "DeviceClass"}
		if err := emit(c); err != nil {
			return nil, err
		}
	}
	for _, sl := range s.Slices {
		sl := sl.DeepCopy()
		sl.TypeMeta = metav1.TypeMeta{APIVersion: api.APIVersion, Kind: api.KindSlice}
		if err := emit(sl); err != nil {
			return nil, err
		}
	}
	for _, cs := range [][]*resourcev1.ResourceClaim{s.Allocated, s.Claims} {
		for _, c := range cs {
			c := c.DeepCopy()
			c.TypeMeta = metav1.TypeMeta{APIVersion: api.APIVersion, Kind: "ResourceClaim"}
			if err := emit(c); err != nil {
				return nil, err
			}
		}
	}
	return b.Bytes(), nil
}

// WriteFile writes the scenario to path.
func (s *Scenario) WriteFile(path string, header []string) error {
	data, err := s.Marshal(header)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Unmarshal reads what Marshal wrote. Claims with status.allocation are
// already allocated; the others are to be allocated, in file order.
func Unmarshal(data []byte) (*Scenario, error) {
	s := &Scenario{}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var err error
		switch tm.Kind {
		case "":
			continue
		case "Node":
			o := &corev1.Node{}
			err = yaml.UnmarshalStrict(doc, o)
			s.Nodes = append(s.Nodes, o)
		case "DeviceClass":
			o := &resourcev1.DeviceClass{}
			err = yaml.UnmarshalStrict(doc, o)
			s.Classes = append(s.Classes, o)
		case api.KindSlice:
			o := &api.ResourceSlice{}
			err = yaml.UnmarshalStrict(doc, o)
			s.Slices = append(s.Slices, o)
		case "ResourceClaim":
			o := &resourcev1.ResourceClaim{}
			err = yaml.UnmarshalStrict(doc, o)
			if o.Status.Allocation != nil {
				s.Allocated = append(s.Allocated, o)
			} else {
				s.Claims = append(s.Claims, o)
			}
		default:
			err = fmt.Errorf("unexpected kind %q", tm.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
	return s, nil
}

// ReadFile reads a scenario file.
func ReadFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
