package decode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/api"
)

// fastObjectSeeds are objects of the kinds the fast decoder takes, using
// every part of their types: metadata with times, owners and managed
// fields; devices with each attribute type, capacities with request
// policies, counters, taints, node selectors; mixins; and values written
// in the less usual ways JSON allows (escapes, numbers for quantities,
// nulls).
var fastObjectSeeds = []string{
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","generation":1,"resourceSliceCount":1},"nodeName":"n","devices":[{"name":"a"}]}}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
	  "metadata":{"name":"s-1","generateName":"s-","namespace":"ns","uid":"0f0e","resourceVersion":"12","generation":3,
	    "creationTimestamp":"2024-05-01T10:00:00Z","deletionTimestamp":null,"deletionGracePeriodSeconds":30,
	    "labels":{"a":"b","c":""},"annotations":{"x/y":"z"},"finalizers":["f"],
	    "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"u","controller":true,"blockOwnerDeletion":false}],
	    "managedFields":[{"manager":"m","operation":"Apply","apiVersion":"resource.k8s.io/v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:devices":{}}},"subresource":""}]},
	  "spec":{"driver":"gpu.example.com","pool":{"name":"p","generation":0,"resourceSliceCount":2},
	    "nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["a","b"]}],"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]},
	    "perDeviceNodeSelection":false,
	    "devices":[
	      {"name":"gpu-0","attributes":{"model":{"string":"H100"},"index":{"int":0},"mig":{"bool":true},"driver":{"version":"1.2.3"},"example.com/x":{"string":"\u00e9\n\"q\""}},
	       "capacity":{"memory":{"value":"80Gi"},"slices":{"value":7},"bw":{"value":"1.5","requestPolicy":{"default":"1","validRange":{"min":"1","max":"10","step":"1"}}},"cores":{"value":"4","requestPolicy":{"validValues":["1","2","4"]}}},
	       "consumesCounters":[{"counterSet":"cs","counters":{"memory":{"value":"10Gi"},"x":{"value":1e3}}}],
	       "taints":[{"key":"k","value":"v","effect":"NoSchedule","timeAdded":"2024-01-01T00:00:00.5Z"},{"key":"k2","effect":"NoExecute"}],
	       "bindsToNode":true,"bindingConditions":["c"],"bindingFailureConditions":["f"],"allowMultipleAllocations":true},
	      {"name":"gpu-1","nodeName":"n2","attributes":null,"capacity":{},"consumesCounters":[]},
	      {"name":"gpu-2","allNodes":true,"nodeAllocatableResources":{"cpu":{"mapping":{"capacityKey":"cores","capacityMultiplier":"2","deviceMultiplier":null},"overhead":{"perPod":"100m","perContainer":"1"}}}}
	    ],
	    "sharedCounters":[{"name":"cs","counters":{"memory":{"value":"80Gi"},"x":{"value":"1k"}}}]}}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"m"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,
	  "mixins":{"device":[{"name":"dm","attributes":{"a":{"int":-5}},"capacity":{"c":{"value":"2"}}}],
	    "deviceCounterConsumption":[{"name":"cm","counters":{"c":{"value":"1"}}}],
	    "counterSet":[{"name":"csm","counters":{"c":{"value":"8"}}}]},
	  "sharedCounters":[{"name":"cs","includes":["csm"],"counters":{"d":{"value":"3"}}}],
	  "devices":[{"name":"x","includes":["dm"],"consumesCounters":[{"counterSet":"cs","includes":["cm"],"compatibilityGroups":["g"]}]}],
	  "partitionTypeAttribute":"example.com/type"}}`,
	`{"kind":"ResourceSlice","apiVersion":"resource.k8s.io/v1","metadata":{"name":"\u0073"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,"devices":[{"name":"a","capacity":{"m":{"value":" 1Gi "}}},{"name":"b","capacity":{"m":{"value":"1e3"}}},{"name":"c","capacity":{"m":{"value":null}}}]}}`,
	// Map keys written with escapes, and the same entry in several maps
	// (the fast decoder caches map values by their bytes).
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"e"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,
	  "devices":[{"name":"a","attributes":{"ls":{"strings":["a","b"]},"li":{"ints":[1,-2]},"lb":{"bools":[true]},"lv":{"versions":["1.0.0"]},"le":{"ints":[]},"\u0061b":{"int":1},"c\/d":{"int":1},"big":{"int":9223372036854775807}},"capacity":{"m":{"value":"123456789012345678901234567890"},"n":{"value":"123456789012345678901234567890"}}},
	    {"name":"b","attributes":{"ab":{"int":1}},"capacity":{"m":{"value":"123456789012345678901234567890"}},"consumesCounters":[{"counterSet":"cs","counters":{"m":{"value":"1"},"n":{"value":"1"}}}]}]}}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s","labels":null,"creationTimestamp":null},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":null,"devices":null,"sharedCounters":null,"mixins":null}}`,
}

// fastKinds are the kinds the fast decoder takes.
func fastKinds() []*kindInfo {
	var out []*kindInfo
	for i := range kinds {
		if kinds[i].fast {
			out = append(out, &kinds[i])
		}
	}
	return out
}

// checkFastObject decodes data as every fast kind both ways: whenever the
// fast decoder accepts it, the strict decoder must accept it too, without
// a single problem, and produce the same object.
func checkFastObject(t *testing.T, data []byte) {
	t.Helper()
	for _, k := range fastKinds() {
		fastV := reflect.New(k.typ)
		if !decodeFast(data, fastV.Interface()) {
			continue
		}
		strictV := reflect.New(k.typ)
		if ferrs := decodeStrict(data, k.typ, strictV.Interface()); len(ferrs) > 0 {
			t.Fatalf("%s: the fast decoder accepts what the strict decoder rejects (%v):\n%s", k.kind, ferrs, data)
		}
		if !reflect.DeepEqual(fastV.Interface(), strictV.Interface()) {
			t.Fatalf("%s: the fast decoder's object differs from the strict decoder's:\nfast:   %+v\nstrict: %+v\ninput: %s", k.kind, fastV.Interface(), strictV.Interface(), data)
		}
		// Decoded again, every map entry comes from the fast decoder's
		// caches: the object must not change.
		againV := reflect.New(k.typ)
		if !decodeFast(data, againV.Interface()) || !reflect.DeepEqual(againV.Interface(), strictV.Interface()) {
			t.Fatalf("%s: decoding again with cached values gives another object:\nagain:  %+v\nstrict: %+v\ninput: %s", k.kind, againV.Interface(), strictV.Interface(), data)
		}
	}
}

// FuzzFastObjectMatchesStrict: for any input, the fast decoder either
// rejects it or produces exactly the strict decoder's object.
func FuzzFastObjectMatchesStrict(f *testing.F) {
	for _, s := range fastObjectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastObject(t, data)
	})
}

// TestFastDecoderTakesSeeds: the seeds are valid, so the fast decoder must
// accept them, or it would never save anything.
func TestFastDecoderTakesSeeds(t *testing.T) {
	for _, s := range fastObjectSeeds {
		for _, k := range fastKinds() {
			if !decodeFast([]byte(s), reflect.New(k.typ).Interface()) {
				t.Errorf("%s: fast decoder rejects a valid object: %s", k.kind, s)
			}
		}
		checkFastObject(t, []byte(s))
	}
}

// TestFastObjectMatchesStrictMutated runs the fuzz property over many
// mutations of the seeds aimed at where two JSON decoders may differ:
// values of other types and forms (numbers with fractions or exponents,
// -0, huge integers, escapes, lone surrogates, invalid UTF-8, control
// characters), member names in other case or repeated, null in every
// place, and structural damage.
func TestFastObjectMatchesStrictMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	// Values by JSON type: a value is replaced by one of its own type
	// (which the decoders mostly accept, in unusual forms) or of any type.
	values := map[byte][]string{
		'n': {`null`},
		't': {`true`, `false`},
		'0': {`0`, `-0`, `1`, `-1`, `1.0`, `1.5`, `1e3`, `1E+2`, `-1e-2`, `0.0000001`, `9223372036854775807`,
			`9223372036854775808`, `-9223372036854775809`, `4294967296`, `2147483648`, `1e400`, `100000000000000000000000`},
		'"': {`""`, `" "`, `"1Gi"`, `"1.5Gi"`, `"-1"`, `"100m"`, `"1e3"`, `"1E3"`, `"0.1Ki"`, `"\u0031"`, `"\u0031Gi"`,
			`"a\u0000b"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", "\"\xc3\xa9\"", "\"\x01\"", `"\/"`,
			`"\t1"`, `"2024-01-01T00:00:00Z"`, `"2024-01-01T00:00:00.123456789+02:00"`, `"2024-01-01 00:00:00"`, `"not a time"`,
			`"NoSchedule"`, `"In"`, `"a/b"`, `"A"`},
		'[': {`[]`, `[1]`, `[null]`, `[""]`, `["a","a"]`, `[{}]`},
		'{': {`{}`, `{"a":1}`, `{"":null}`, `{"value":"1"}`, `{"string":"x"}`, `{"int":1,"int":2}`, `{"a":{"string":"x"}}`},
	}
	var seeds [][]byte
	for _, s := range fastObjectSeeds {
		seeds = append(seeds, []byte(s))
	}
	n := 4000
	if testing.Short() {
		n = 400
	}
	for range n {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			b = mutateJSON(rng, b, values)
		}
		checkFastObject(t, b)
	}
}

// mutateJSON changes one place of b: a value, a member name, or a byte.
func mutateJSON(rng *rand.Rand, b []byte, values map[byte][]string) []byte {
	if len(b) == 0 {
		return b
	}
	// Positions just after a ':' or '[' or ',' start values (mostly).
	var starts, names []int
	for i := 0; i+1 < len(b); i++ {
		switch b[i] {
		case ':', '[':
			starts = append(starts, i+1)
		case ',':
			starts = append(starts, i+1)
			if b[i+1] == '"' {
				names = append(names, i+1)
			}
		case '{':
			if b[i+1] == '"' {
				names = append(names, i+1)
			}
		}
	}
	switch rng.IntN(6) {
	case 0, 1: // replace a value
		if len(starts) == 0 {
			return b
		}
		i := skipSpace(b, starts[rng.IntN(len(starts))])
		end, ok := skipValue(b, i)
		if !ok {
			return b
		}
		typ := []byte("nt0\"[{")[rng.IntN(6)]
		if rng.IntN(3) > 0 {
			typ = jsonTypeKey(b[i])
		}
		vals := values[typ]
		return append(b[:i:i], append([]byte(vals[rng.IntN(len(vals))]), b[end:]...)...)
	case 2: // repeat a member
		if len(names) == 0 {
			return b
		}
		i := names[rng.IntN(len(names))]
		end, ok := skipValue(b, i)
		if !ok {
			return b
		}
		vend, ok := skipValue(b, skipSpace(b, skipSpace(b, end)+1))
		if !ok {
			return b
		}
		member := bytes.Clone(b[i:vend])
		return append(b[:vend:vend], append(append([]byte{','}, member...), b[vend:]...)...)
	case 3: // change a member name's case or spelling
		if len(names) == 0 {
			return b
		}
		i := names[rng.IntN(len(names))] + 1
		switch c := b[i]; {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
		default:
			b[i] = 'q'
		}
		return b
	case 4: // an escape or odd byte inside a string
		i := rng.IntN(len(b))
		if j := bytes.IndexByte(b[i:], '"'); j >= 0 {
			ins := []string{`\u0041`, `\n`, "\xff", `\ud800`, "\x00", `é`, `\\`}[rng.IntN(7)]
			at := i + j + 1
			return append(b[:at:at], append([]byte(ins), b[at:]...)...)
		}
		return b
	default: // damage the structure
		i := rng.IntN(len(b))
		b[i] = `{}[]":, 0n`[rng.IntN(10)]
		return b
	}
}

// jsonTypeKey is the key of values for a value starting with c.
func jsonTypeKey(c byte) byte {
	switch c {
	case 'n', '"', '[', '{':
		return c
	case 't', 'f':
		return 't'
	default:
		return '0'
	}
}

func TestMutateJSONChangesInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	changed := 0
	for range 100 {
		s := fastObjectSeeds[0]
		if m := mutateJSON(rng, []byte(s), map[byte][]string{'n': {"null"}, 't': {"true"}, '0': {"1"}, '"': {`""`}, '[': {"[]"}, '{': {"{}"}}); !strings.EqualFold(string(m), s) {
			changed++
		}
	}
	if changed < 50 {
		t.Fatalf("only %d of 100 mutations changed the input", changed)
	}
}

// TestFastMapsOwnTheirValues: map values of equal bytes come from one
// cache entry, but each decoded object owns its values: changing one
// device's attribute or quantity (also one held as a big number) changes
// no other device's.
func TestFastMapsOwnTheirValues(t *testing.T) {
	dev := func(name string) string {
		return `{"name":"` + name + `","attributes":{"a":{"string":"x"},"i":{"int":1},"b":{"bool":true},"v":{"version":"1.0.0"},"l":{"strings":["p","q"]}},` +
			`"capacity":{"big":{"value":"123456789012345678901234567890"},"p":{"value":"1","requestPolicy":{"validValues":["1"]}}},` +
			`"consumesCounters":[{"counterSet":"cs","counters":{"big":{"value":"123456789012345678901234567890"}}}]}`
	}
	data := []byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"nodeName":"n","devices":[` +
		dev("d0") + `,` + dev("d1") + `]}}`)
	for range 2 { // the second time, everything comes from the caches
		var s api.ResourceSlice
		if !decodeFast(data, &s) {
			t.Fatal("fast decoder rejects a valid slice")
		}
		d0, d1 := &s.Spec.Devices[0], &s.Spec.Devices[1]
		*d0.Attributes["a"].StringValue = "changed"
		*d0.Attributes["i"].IntValue = 7
		*d0.Attributes["b"].BoolValue = false
		*d0.Attributes["v"].VersionValue = "2.0.0"
		d0.Attributes["l"].StringValues[0] = "changed"
		big := d0.Capacity["big"].Value
		big.Add(resource.MustParse("1"))
		d0.Capacity["big"] = api.DeviceCapacity{Value: big}
		d0.Capacity["p"].RequestPolicy.ValidValues[0] = resource.MustParse("2")
		c := d0.ConsumesCounters[0].Counters["big"].Value
		c.Add(resource.MustParse("1"))
		a := d1.Attributes
		if *a["a"].StringValue != "x" || *a["i"].IntValue != 1 || !*a["b"].BoolValue || *a["v"].VersionValue != "1.0.0" || a["l"].StringValues[0] != "p" {
			t.Errorf("changing one device's attributes changed another's: %v", a)
		}
		if q := d1.Capacity["big"].Value; q.String() != "123456789012345678901234567890" {
			t.Errorf("changing one device's capacity changed another's: %s", q.String())
		}
		if q := d1.Capacity["p"].RequestPolicy.ValidValues[0]; q.String() != "1" {
			t.Errorf("changing one device's request policy changed another's: %s", q.String())
		}
		if q := d1.ConsumesCounters[0].Counters["big"].Value; q.String() != "123456789012345678901234567890" {
			t.Errorf("changing one device's counter changed another's: %s", q.String())
		}
	}
}

func TestCountElements(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`[]`, 0},
		{` [ ] `, 0},
		{`[1]`, 1},
		{`[{"a":[1,2]}, "x,y" ,[],null]`, 4},
		{"[\n  {},\n  {}\n]", 2},
		{`null`, 0},
		{`{"a":1}`, 0},
		{`[1,`, 1}, // not valid: any count will do, no panic
	} {
		if got := countElements([]byte(tc.in)); got != tc.want {
			t.Errorf("countElements(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestFastDevicesMadeAtFinalSize: the fast path gives a slice's device
// list exactly the room it needs, whatever the spacing around the array.
func TestFastDevicesMadeAtFinalSize(t *testing.T) {
	for _, sep := range []string{"", " ", "\n  "} {
		var devs []string
		for i := range 5 {
			devs = append(devs, fmt.Sprintf(`{"name":"d%d","attributes":{"a":{"int":%d}}}`, i, i))
		}
		data := `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,"devices"` +
			sep + ":" + sep + "[" + sep + strings.Join(devs, ","+sep) + sep + "]}}"
		var s api.ResourceSlice
		if !decodeFast([]byte(data), &s) {
			t.Fatalf("fast path rejected %s", data)
		}
		if got := s.Spec.Devices; len(got) != 5 || cap(got) != 5 {
			t.Errorf("separator %q: %d devices in a slice of capacity %d, want 5 and 5", sep, len(got), cap(got))
		}
	}
}
