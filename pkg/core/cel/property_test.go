package cel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/ref"
	"github.com/dractl/dractl/pkg/internal/celgo/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

const propDriver = "gpu.example.com"

// Names are drawn from small pools so that the device and its mixins
// collide often: precedence, both spellings of a driver-domain name and
// domains with only mixin entries all show up within a few devices.
var (
	propIDs     = []string{"a", "b", "c", "model", "mem"}
	propDomains = []string{"", propDriver, "dra.example.com", "other.example.com"}
)

func randName(r *rand.Rand) api.QualifiedName {
	id := propIDs[r.IntN(len(propIDs))]
	if d := propDomains[r.IntN(len(propDomains))]; d != "" {
		return api.QualifiedName(d + "/" + id)
	}
	return api.QualifiedName(id)
}

func randAttribute(r *rand.Rand) api.DeviceAttribute {
	switch r.IntN(8) {
	case 0:
		return num(int64(r.IntN(4)))
	case 1:
		return boolean(r.IntN(2) == 0)
	case 2:
		return str([]string{"x", "y", "1g.10gb"}[r.IntN(3)])
	case 3:
		return ver(fmt.Sprintf("1.%d.0", r.IntN(3)))
	case 4:
		return api.DeviceAttribute{IntValues: []int64{int64(r.IntN(3)), 7}}
	case 5:
		return api.DeviceAttribute{BoolValues: []bool{r.IntN(2) == 0}}
	case 6:
		return api.DeviceAttribute{StringValues: []string{"x", []string{"y", "z"}[r.IntN(2)]}}
	default:
		return api.DeviceAttribute{VersionValues: []string{fmt.Sprintf("2.%d.1", r.IntN(3))}}
	}
}

func randEntries(r *rand.Rand) (attrs, caps) {
	var a attrs
	var c caps
	for range r.IntN(6) {
		if a == nil {
			a = attrs{}
		}
		a[randName(r)] = randAttribute(r)
	}
	for range r.IntN(3) {
		if c == nil {
			c = caps{}
		}
		c[randName(r)] = quant(fmt.Sprintf("%dGi", r.IntN(4)))
	}
	return a, c
}

// randSlice is a one-device slice whose device includes up to four of
// five mixins, in random order and possibly twice.
func randSlice(r *rand.Rand) *api.ResourceSliceSpec {
	spec := &api.ResourceSliceSpec{Driver: propDriver, Mixins: &api.ResourceSliceMixins{}}
	for i := range 5 {
		a, c := randEntries(r)
		spec.Mixins.Device = append(spec.Mixins.Device, api.DeviceMixin{Name: fmt.Sprintf("m%d", i), Attributes: a, Capacity: c})
	}
	a, c := randEntries(r)
	d := api.Device{Name: "dev", Attributes: a, Capacity: c}
	for range r.IntN(5) {
		d.Includes = append(d.Includes, fmt.Sprintf("m%d", r.IntN(5)))
	}
	if r.IntN(3) == 0 {
		d.AllowMultipleAllocations = ptr.To(true)
	}
	spec.Devices = []api.Device{d}
	return spec
}

// propExprs read every part of the device in the ways selectors do:
// look-ups (some of which fail), presence, iteration, size, equality.
func propExprs() []string {
	var out []string
	for _, dom := range []string{propDriver, "dra.example.com", "other.example.com", "none.example.com"} {
		a := fmt.Sprintf("device.attributes[%q]", dom)
		c := fmt.Sprintf("device.capacity[%q]", dom)
		out = append(out,
			fmt.Sprintf("size(%s) == 2", a),
			fmt.Sprintf("%s.exists(k, k == 'model')", a),
			fmt.Sprintf("%s.all(k, v, v != 'x')", a),
			fmt.Sprintf("%q in device.attributes", dom),
			fmt.Sprintf("%q in device.capacity", dom),
			fmt.Sprintf("%s == {}", c),
			fmt.Sprintf("%s.all(k, v, v.isLessThan(quantity('2Gi')))", c),
		)
		for _, id := range propIDs {
			out = append(out,
				fmt.Sprintf("has(%s.%s)", a, id),
				fmt.Sprintf("%q in %s", id, a),
				fmt.Sprintf("%s.%s == 1", a, id),
				fmt.Sprintf("%s.%s == '1g.10gb'", a, id),
				fmt.Sprintf("%s.%s.isGreaterThan(semver('1.0.0'))", a, id),
				fmt.Sprintf("%s.%s.exists(e, e == 7)", a, id),
				fmt.Sprintf("%s.?%s.orValue(false) == true", a, id),
				fmt.Sprintf("%s.%s.compareTo(quantity('1Gi')) > 0", c, id),
			)
		}
	}
	return append(out,
		"size(device.attributes) == 2",
		"size(device.capacity) >= 1",
		"device.attributes.all(d, size(device.attributes[d]) > 0)",
		"device.allowMultipleAllocations",
		"device.driver == 'gpu.example.com'",
	)
}

type outcome struct {
	match bool
	err   string
}

func (o outcome) String() string {
	if o.err != "" {
		return "error: " + o.err
	}
	return fmt.Sprint(o.match)
}

func evalLazy(p *Program, view api.DeviceView) outcome {
	m, err := p.Matches(context.Background(), Device{Driver: propDriver, View: view})
	if err != nil {
		// The lazy path wraps errors with the expression; compare the
		// CEL part only.
		return outcome{err: err.(*EvalError).Err.Error()}
	}
	return outcome{match: m}
}

// refFlatten applies mixins the obvious way, independently of pkg/core/api:
// each include in order overwrites, then the device's own entries do.
func refFlatten(spec *api.ResourceSliceSpec) (attrs, caps) {
	a, c := attrs{}, caps{}
	d := &spec.Devices[0]
	for _, inc := range d.Includes {
		for _, m := range spec.Mixins.Device {
			if m.Name == inc {
				for k, v := range m.Attributes {
					a[k] = v
				}
				for k, v := range m.Capacity {
					c[k] = v
				}
			}
		}
	}
	for k, v := range d.Attributes {
		a[k] = v
	}
	for k, v := range d.Capacity {
		c[k] = v
	}
	return a, c
}

// evalEager evaluates the way upstream does: Go maps of every value built
// before evaluation, a missing domain read as an empty map.
func evalEager(t *testing.T, p *Program, spec *api.ResourceSliceSpec) outcome {
	a, c := refFlatten(spec)
	adapter := p.c.env.CELTypeAdapter()
	attrDomains := map[string]any{}
	for name, v := range a {
		dom, id := splitName(name, propDriver)
		if strings.Contains(string(name), "/") && dom == propDriver {
			if _, short := a[api.QualifiedName(id)]; short {
				continue // the documented tie-break: the short spelling wins
			}
		}
		if attrDomains[dom] == nil {
			attrDomains[dom] = map[string]any{}
		}
		attrDomains[dom].(map[string]any)[id] = nativeAttribute(t, v)
	}
	capDomains := map[string]any{}
	for name, v := range c {
		dom, id := splitName(name, propDriver)
		if strings.Contains(string(name), "/") && dom == propDriver {
			if _, short := c[api.QualifiedName(id)]; short {
				continue
			}
		}
		if capDomains[dom] == nil {
			capDomains[dom] = map[string]any{}
		}
		q := v.Value
		capDomains[dom].(map[string]any)[id] = apiservercel.Quantity{Quantity: &q}
	}
	empty := types.NewStringInterfaceMap(adapter, map[string]any{})
	vars := map[string]any{deviceVar: map[string]any{
		driverVar:     propDriver,
		multiAllocVar: ptr.Deref(spec.Devices[0].AllowMultipleAllocations, false),
		attributesVar: defaultMap{types.NewStringInterfaceMap(adapter, attrDomains), empty},
		capacityVar:   defaultMap{types.NewStringInterfaceMap(adapter, capDomains), empty},
	}}
	out, _, err := p.prog.ContextEval(context.Background(), vars)
	if err != nil {
		return outcome{err: err.Error()}
	}
	b, ok := out.(types.Bool)
	if !ok {
		return outcome{err: "selector must evaluate to bool, got " + out.Type().TypeName()}
	}
	return outcome{match: bool(b)}
}

func nativeAttribute(t *testing.T, a api.DeviceAttribute) any {
	parse := func(s string) apiservercel.Semver {
		v, err := semver.Parse(s)
		if err != nil {
			t.Fatalf("generator produced bad version %q", s)
		}
		return apiservercel.Semver{Version: v}
	}
	switch {
	case a.IntValues != nil:
		return a.IntValues
	case a.BoolValues != nil:
		return a.BoolValues
	case a.StringValues != nil:
		return a.StringValues
	case a.VersionValues != nil:
		var out []apiservercel.Semver
		for _, s := range a.VersionValues {
			out = append(out, parse(s))
		}
		return out
	case a.IntValue != nil:
		return *a.IntValue
	case a.BoolValue != nil:
		return *a.BoolValue
	case a.StringValue != nil:
		return *a.StringValue
	default:
		return parse(*a.VersionValue)
	}
}

// defaultMap answers every look-up, with an empty map when the key is
// missing.
type defaultMap struct {
	traits.Mapper
	empty ref.Val
}

func (m defaultMap) Find(key ref.Val) (ref.Val, bool) {
	if v, ok := m.Mapper.Find(key); ok {
		return v, true
	}
	return m.empty, true
}

// TestLazyAgreesWithEager is the differential test against upstream's
// approach: for random devices with random mixins, every expression gives
// the same result (or the same error) on the lazy view as on eagerly
// built maps of the device with its mixins applied.
func TestLazyAgreesWithEager(t *testing.T) {
	c := NewCompiler()
	exprs := propExprs()
	progs := make([]*Program, len(exprs))
	for i, e := range exprs {
		p, err := c.Compile(e)
		if err != nil {
			t.Fatalf("Compile(%s): %v", e, err)
		}
		progs[i] = p
	}
	matched, failed := 0, 0
	for seed := range uint64(300) {
		spec := randSlice(rand.New(rand.NewPCG(seed, 5234)))
		view := viewsOf(t, spec)["dev"]
		for _, p := range progs {
			lazy, eager := evalLazy(p, view), evalEager(t, p, spec)
			if lazy != eager {
				t.Fatalf("seed %d, %s:\nlazy:  %v\neager: %v\ndevice: %+v", seed, p.Expression(), lazy, eager, spec)
			}
			if lazy.match {
				matched++
			}
			if lazy.err != "" {
				failed++
			}
		}
	}
	// Guard against a generator that makes every expression trivially
	// false or erroneous, which would make the comparison vacuous.
	if total := 300 * len(progs); matched < total/20 || failed < total/20 || matched+failed > total*19/20 {
		t.Fatalf("outcomes too uniform: %d matched, %d errors of %d", matched, failed, total)
	}
}

// TestLazyAgreesWithFlatten: reading through the mixins must give what
// the flattened device gives.
func TestLazyAgreesWithFlatten(t *testing.T) {
	c := NewCompiler()
	exprs := propExprs()
	for seed := range uint64(300) {
		spec := randSlice(rand.New(rand.NewPCG(seed, 4815)))
		view := viewsOf(t, spec)["dev"]
		flat := view.Flatten()
		flatView := api.DeviceView{Device: &flat}
		for _, e := range exprs {
			p, err := c.Compile(e)
			if err != nil {
				t.Fatalf("Compile(%s): %v", e, err)
			}
			if lazy, flattened := evalLazy(p, view), evalLazy(p, flatView); lazy != flattened {
				t.Fatalf("seed %d, %s:\nlazy:      %v\nflattened: %v\ndevice: %+v\nflattened device: %+v", seed, e, lazy, flattened, spec, flat)
			}
		}
	}
}
