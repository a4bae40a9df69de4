package decode

import (
	"bytes"
	stdjson "encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fastSeeds are JSON streams and lists exercising the fast mode's
// shortcuts: lists found while splitting, items read by the workers,
// several documents per stream, and clean and unclean documents.
var fastSeeds = []string{
	`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}},{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"c"}}]}`,
	`{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"Node","metadata":{"name":"b"}}
[1] {"apiVersion":"v1","kind":"Node","metadata":{"name":"c"}}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"s"},"spec":{"driver":"d","pool":{"name":"p","resourceSliceCount":1},"allNodes":true,"devices":[{"name":"a","attributes":{"m":{"string":"x"}},"capacity":{"mem":{"value":"1Gi"}}}]}}]}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","items":[]}`,
	`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSliceList","items":null}`,
	`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}],"items":[]}`,
	`{"kind":"List","apiVersion":"v1","metadata":{},"items":[ {"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"k":"v"}}} , {"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}} ]}
{"apiVersion":"v1","kind":"Node"}`,
}

// checkFastMatchesCareful decodes data in both modes: when the fast mode
// claims its result, the result must be the careful one; and Bytes must
// always return the careful result.
func checkFastMatchesCareful(t *testing.T, data []byte) {
	t.Helper()
	in := []input{{name: "f.json", data: data}}
	careObjs, careErr, _ := decodeInputsMode(in, false, DefaultMaxObjectBytes)
	fastObjs, fastErr, ok := decodeInputsMode(in, true, DefaultMaxObjectBytes)
	if ok && (!reflect.DeepEqual(fastObjs, careObjs) || !reflect.DeepEqual(fastErr, careErr)) {
		t.Fatalf("fast mode differs from careful mode on %q:\nfast:    %v %v\ncareful: %v %v", data, len(fastObjs), fastErr, len(careObjs), careErr)
	}
	if !ok && validStream(data) {
		t.Fatalf("fast mode gave up on valid JSON %q", data)
	}
	objs, err := Bytes("f.json", data)
	if !reflect.DeepEqual(objs, careObjs) || !reflect.DeepEqual(err, careErr) {
		t.Fatalf("Bytes differs from careful mode on %q:\nBytes:   %v\ncareful: %v", data, err, careErr)
	}
}

// validStream reports whether data is a stream of valid JSON values as
// splitJSON cuts it (the fast mode must never give up on those).
func validStream(data []byte) bool {
	docs := splitJSON("x", bytes.TrimPrefix(data, bom), nil, false, DefaultMaxObjectBytes)
	for _, d := range docs {
		if !jsonValid(d.data) {
			return false
		}
	}
	return len(docs) > 0
}

// FuzzFastMatchesCareful: for any input, the fast mode either gives up or
// returns exactly what the careful mode returns.
func FuzzFastMatchesCareful(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastMatchesCareful(t, data)
	})
}

// TestFastMatchesCarefulMutated runs the fuzz property over many random
// mutations of the seeds: deleted, duplicated and swapped bytes, case
// changes (the strict decoder is case-sensitive), and fragments of other
// documents spliced in.
func TestFastMatchesCarefulMutated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var seeds [][]byte
	for _, s := range fastSeeds {
		seeds = append(seeds, []byte(s))
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			seeds = append(seeds, data)
		}
	}
	const special = `{}[]":,\ 0a-nulltrue`
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		b := bytes.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			if len(b) == 0 {
				break
			}
			i := rng.IntN(len(b))
			switch rng.IntN(6) {
			case 0: // delete a byte
				b = append(b[:i], b[i+1:]...)
			case 1: // replace with a structural byte
				b[i] = special[rng.IntN(len(special))]
			case 2: // flip the case of a letter
				if c := b[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
					b[i] ^= 0x20
				}
			case 3: // duplicate a span
				j := min(len(b), i+1+rng.IntN(40))
				b = append(b[:j], append(bytes.Clone(b[i:j]), b[j:]...)...)
			case 4: // splice in a piece of another seed
				o := seeds[rng.IntN(len(seeds))]
				k := rng.IntN(len(o))
				piece := o[k:min(len(o), k+1+rng.IntN(60))]
				b = append(b[:i], append(bytes.Clone(piece), b[i:]...)...)
			case 5: // a control byte or invalid UTF-8
				b[i] = []byte{0, '\n', 0x1f, 0xff}[rng.IntN(4)]
			}
		}
		checkFastMatchesCareful(t, b)
	}
}

// TestFastModeTakesValidLists: the fast mode keeps its result for valid
// lists, including the ones whose items have problems.
func TestFastModeTakesValidLists(t *testing.T) {
	for _, s := range fastSeeds {
		if !validStream([]byte(s)) {
			continue
		}
		if _, _, ok := decodeInputsMode([]input{{name: "f.json", data: []byte(s)}}, true, DefaultMaxObjectBytes); !ok {
			t.Errorf("fast mode gave up on valid JSON %q", s)
		}
	}
}

func jsonValid(b []byte) bool { return stdjson.Valid(b) }
