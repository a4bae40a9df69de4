package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/convert"
	par "github.com/dractl/dractl/pkg/internal/parallel"
)

// Paths decodes every object in the given files, directories and, for
// "-", stdin (which may be nil when "-" is not among paths). Directories
// contribute their *.yaml, *.yml and *.json files in lexical order;
// subdirectories are not entered unless Options.Recursive is set.
//
// The objects are returned in input order. The error is nil or an Errors
// listing every problem in every input; objects with a problem are left
// out of the result and all others are still returned. A path that holds
// nothing to decode (a file or stdin without a single document, a
// directory without manifests or whose manifests hold none) is an Error
// with Empty set: an empty List is a document, and is not empty.
func Paths(paths []string, stdin io.Reader) ([]Object, error) {
	return Options{}.Paths(paths, stdin)
}

// Bytes decodes the objects in data, naming them as coming from file. It
// returns like Paths.
func Bytes(file string, data []byte) ([]Object, error) {
	return Options{}.Bytes(file, data)
}

// DefaultMaxObjectBytes is kube-apiserver's limit on the size of one request
// body (its MaxRequestBodyBytes default), and so on one object written to
// it: 3 MiB.
const DefaultMaxObjectBytes = 3 << 20

// Options tune decoding. The zero value decodes as Paths and Bytes do.
type Options struct {
	// MaxObjectBytes bounds the size of one object as written (a YAML
	// document, a JSON value, one item of a List); larger objects are
	// errors and are not parsed, so memory stays proportional to the input
	// that can be valid. Zero means DefaultMaxObjectBytes.
	MaxObjectBytes int
	// Recursive reads the directories below each directory too (hidden
	// ones, named ".*", excepted), every manifest once, in the lexical
	// order of the walk, as kubectl -R does.
	Recursive bool
}

func (o Options) maxObjectBytes() int {
	if o.MaxObjectBytes <= 0 {
		return DefaultMaxObjectBytes
	}
	return o.MaxObjectBytes
}

// Paths is the package-level Paths with these options.
func (o Options) Paths(paths []string, stdin io.Reader) ([]Object, error) {
	return decodeInputs(o.readPaths(paths, stdin), o.maxObjectBytes())
}

// Bytes is the package-level Bytes with these options.
func (o Options) Bytes(file string, data []byte) ([]Object, error) {
	return decodeInputs([]input{{name: file, data: data}}, o.maxObjectBytes())
}

// input is the content of one file, or why it could not be read.
type input struct {
	name string
	data []byte
	err  string
	// empty: the input holds nothing to decode (err says why).
	empty bool
	// arg is the index of the path the input was read for; a directory
	// gives several inputs with the same arg.
	arg int
	// dir is the directory given as paths[arg], for its files.
	dir string
}

var manifestExts = []string{".yaml", ".yml", ".json"}

func isManifest(name string) bool {
	return slices.Contains(manifestExts, strings.ToLower(filepath.Ext(name)))
}

func (o Options) readPaths(paths []string, stdin io.Reader) []input {
	var out []input
	stdinRead := false
	for arg, p := range paths {
		if p == "-" {
			in := input{name: p}
			switch {
			case stdinRead:
				in.err = "stdin given more than once; it can be read only once"
			case stdin == nil:
				in.err = "stdin is not available"
			default:
				stdinRead = true
				data, err := io.ReadAll(stdin)
				in = readResult(p, data, err)
			}
			in.arg = arg
			out = append(out, in)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			var data []byte
			if err == nil {
				data, err = os.ReadFile(p)
			}
			in := readResult(p, data, err)
			in.arg = arg
			out = append(out, in)
			continue
		}
		files, err := o.manifests(p)
		if err != nil {
			in := readResult(p, nil, err)
			in.arg = arg
			out = append(out, in)
			continue
		}
		if len(files) == 0 {
			// Almost always a wrong path; an empty result would hide it.
			what := "directory holds no *.yaml, *.yml or *.json files"
			if o.Recursive {
				what += ", nor do the directories below it"
			}
			out = append(out, input{name: p, err: what, empty: true, arg: arg})
			continue
		}
		for _, name := range files {
			data, err := os.ReadFile(name)
			in := readResult(name, data, err)
			in.arg, in.dir = arg, p
			out = append(out, in)
		}
	}
	return out
}

// manifests lists the manifests of directory dir, sorted by name, and
// with Recursive those below it, in the order of a lexical walk.
func (o Options) manifests(dir string) ([]string, error) {
	var files []string
	if !o.Recursive {
		entries, err := os.ReadDir(dir) // sorted by name
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && isManifest(e.Name()) {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
		return files, nil
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if isManifest(d.Name()) {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

func readResult(name string, data []byte, err error) input {
	if err == nil {
		return input{name: name, data: data}
	}
	// The path is already in the Source; keep only the reason.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return input{name: name, err: "cannot read: " + err.Error()}
}

// doc is one document of one input, not yet understood.
type doc struct {
	src  Source
	data []byte // a YAML chunk or a JSON value
	yaml bool
	json bool   // data is JSON not yet validated
	err  *Error // the input could not be read here
	// For JSON documents: the whole input, where the previous value ended,
	// and which value of the input this is (1-based). A stream that turns
	// out not to be JSON at its first or second value is read as YAML from
	// there on, as apimachinery's YAMLOrJSONDecoder (and so kubectl) does.
	file    []byte
	prevEnd int
	nth     int
	// max is the size limit of one object.
	max int
	// members are data's members when splitting already listed them
	// (fast mode only; parsed says whether they are set).
	members []member
	parsed  bool
}

// unit is one object to decode: a document, or an item of a List.
type unit struct {
	src  Source
	data []byte // a JSON object
	kind *kindInfo
	name string
	// list is set for an item of a List whose header is not read yet:
	// that is done by the worker that decodes the item.
	list     *header
	itemKind string
	// other is set for an object of a kind dractl does not judge.
	other *header
	max   int // the size limit, checked for list items
	// decoded is set when the unit was decoded while its document was
	// read (see units).
	decoded *unitResult
}

// jsonBuffers holds memory for the JSON of YAML documents (*[]byte).
var jsonBuffers = sync.Pool{New: func() any { return new([]byte) }}

type docResult struct {
	units []unit
	errs  []*Error
}

type unitResult struct {
	obj  Object
	errs []*Error
}

// decodeInputs decodes optimistically (see decodeInputsMode) and, in the
// rare case that some JSON document turns out not to be valid JSON, again
// the careful way, so that the result is always the careful one.
func decodeInputs(inputs []input, maxBytes int) ([]Object, error) {
	objs, err, ok := decodeInputsMode(inputs, true, maxBytes)
	if !ok {
		objs, err, _ = decodeInputsMode(inputs, false, maxBytes)
	}
	return rejectDuplicates(objs, err)
}

// decodeInputsMode decodes inputs. The careful mode (fast false) checks
// every JSON document with json.Valid before looking into it, which is a
// full serial pass over the document before any parallel work begins. The
// fast mode skips that check: the strict decoder validates every object
// it decodes anyway, so a document all of whose objects decode cleanly is
// proven valid by checking only what lies between its objects (see
// validJSONDoc); only documents with errors are checked in full. ok is
// false when some JSON document is invalid: the fast result may then
// differ from the careful one and must be discarded.
//
// Apart from that check both modes run the same code, so whenever ok is
// true their results are the same.
func decodeInputsMode(inputs []input, fast bool, maxBytes int) (_ []Object, _ error, ok bool) {
	var docs []doc
	// found counts the documents of each path given; a directory's are
	// its files'.
	found := map[int]int{}
	for i, in := range inputs {
		n := len(docs)
		docs = splitInput(in, docs, fast, maxBytes)
		found[in.arg] += len(docs) - n
		if last := i+1 == len(inputs) || inputs[i+1].arg != in.arg; last && found[in.arg] == 0 {
			docs = append(docs, emptyInput(in))
		}
	}
	// Parse (YAML) and find kinds and list items, in parallel per document.
	docRes := make([]docResult, len(docs))
	parallel(len(docs), func(i int) {
		docRes[i].units, docRes[i].errs = docs[i].units(fast)
	})
	// A JSON document that failed validation ends the JSON stream: the
	// ones cut after it may be pieces of it. As in kubectl, a stream whose
	// first or second value is not JSON is YAML from there on; a later bad
	// value is an error that ends the input.
	for i := 0; !fast && i < len(docs); i++ {
		if docs[i].json && docRes[i].units == nil && len(docRes[i].errs) > 0 && strings.HasPrefix(docRes[i].errs[0].Detail, "invalid JSON") {
			j := i + 1
			for j < len(docs) && docs[j].json && docs[j].src.File == docs[i].src.File && docs[j].src.Doc > docs[i].src.Doc {
				j++
			}
			if docs[i].nth > 2 {
				docs = slices.Delete(docs, i+1, j)
				docRes = slices.Delete(docRes, i+1, j)
				continue
			}
			d := docs[i]
			yamlDocs := splitYAMLFrom(d.src.File, d.file, yamlStart(d.file, d.prevEnd), d.src.Doc, d.max, nil)
			yamlRes := make([]docResult, len(yamlDocs))
			parallel(len(yamlDocs), func(k int) {
				yamlRes[k].units, yamlRes[k].errs = yamlDocs[k].units(false)
			})
			if len(yamlDocs) > 0 && yamlRes[0].units == nil && len(yamlRes[0].errs) > 0 && yamlDocs[0].src.Line <= docRes[i].errs[0].Source.Line+1 {
				// Neither JSON nor YAML: say both, since the file began
				// as JSON (kubectl reports only the JSON error).
				e := *yamlRes[0].errs[0]
				e.Detail = docRes[i].errs[0].Detail + "; read as YAML, as kubectl does next: " + e.Detail
				yamlRes[0].errs = append([]*Error{&e}, yamlRes[0].errs[1:]...)
			}
			docs = slices.Replace(docs, i, j, yamlDocs...)
			docRes = slices.Replace(docRes, i, j, yamlRes...)
			i += len(yamlDocs) - 1
		}
	}
	var units []unit
	for i := range docRes {
		units = append(units, docRes[i].units...)
	}
	// Decode, in parallel per object: a List's items spread over workers.
	unitRes := make([]unitResult, len(units))
	parallel(len(units), func(i int) {
		unitRes[i].obj, unitRes[i].errs = units[i].decode(fast)
	})
	if fast && !validJSONDocs(docs, docRes, unitRes) {
		return nil, nil, false
	}

	objs := make([]Object, 0, len(units))
	var errs Errors
	next := 0
	for i := range docs {
		first := len(errs)
		errs = append(errs, docRes[i].errs...)
		for range docRes[i].units {
			r := &unitRes[next]
			next++
			if len(r.errs) > 0 {
				errs = append(errs, r.errs...)
				continue
			}
			objs = append(objs, r.obj)
		}
		// Item errors found while splitting a list and while decoding its
		// items interleave by item.
		slices.SortStableFunc(errs[first:], func(a, b *Error) int { return a.Source.Item - b.Source.Item })
	}
	if len(errs) > 0 {
		return objs, errs, true
	}
	return objs, nil, true
}

// validJSONDocs reports whether every JSON document is valid JSON, as the
// careful mode would find with json.Valid. A document none of whose
// objects had a problem needs only its skeleton checked: every object was
// decoded by the strict decoder, which validates its input first, and
// replacing valid values by "0" neither makes valid JSON invalid nor the
// reverse. Other documents are checked in full, in parallel.
func validJSONDocs(docs []doc, docRes []docResult, unitRes []unitResult) bool {
	type check struct {
		d     *doc
		units []unit // set for a clean document: check only the skeleton
	}
	var checks []check
	next := 0
	for i := range docs {
		n := len(docRes[i].units)
		res := unitRes[next : next+n]
		next += n
		if !docs[i].json {
			continue
		}
		clean := len(docRes[i].errs) == 0
		for j := range res {
			if len(res[j].errs) > 0 {
				clean = false
			}
		}
		c := check{d: &docs[i]}
		if clean {
			c.units = docRes[i].units
			if len(c.units) == 1 && len(c.units[0].data) == len(c.d.data) {
				continue // the document is the object
			}
		}
		checks = append(checks, c)
	}
	var bad atomic.Bool
	parallel(len(checks), func(i int) {
		c := checks[i]
		if c.units == nil {
			if !json.Valid(c.d.data) {
				bad.Store(true)
			}
			return
		}
		if sk, ok := skeleton(c.d.data, c.units); !ok || !json.Valid(sk) {
			bad.Store(true)
		}
	})
	return !bad.Load()
}

// skeleton returns data with the data of each unit, which must be
// subslices of data in order, replaced by "0".
func skeleton(data []byte, units []unit) ([]byte, bool) {
	out := make([]byte, 0, 64+4*len(units))
	at := 0
	for _, u := range units {
		off := cap(data) - cap(u.data)
		if off < at || off+len(u.data) > len(data) || len(u.data) == 0 || &data[off] != &u.data[0] {
			return nil, false
		}
		out = append(out, data[at:off]...)
		out = append(out, '0')
		at = off + len(u.data)
	}
	return append(out, data[at:]...), true
}

// parallel runs fn(0..n-1) on the machine's cores.
func parallel(n int, fn func(i int)) { par.For(n, fn) }

var bom = []byte("\xef\xbb\xbf")

// splitInput cuts one input into documents. Input whose first non-blank
// character opens a JSON object is a JSON stream, as apimachinery's
// YAMLOrJSONDecoder (and so kubectl) decides; anything else is YAML.
func splitInput(in input, docs []doc, fast bool, maxBytes int) []doc {
	if in.err != "" {
		return append(docs, doc{err: &Error{Source: Source{File: in.name, Item: -1}, Detail: in.err, Empty: in.empty}})
	}
	data := bytes.TrimPrefix(in.data, bom)
	if bytes.HasPrefix(bytes.TrimLeftFunc(data, unicode.IsSpace), []byte("{")) {
		return splitJSON(in.name, data, docs, fast, maxBytes)
	}
	return splitYAMLFrom(in.name, data, 0, 1, maxBytes, docs)
}

// emptyInput is the error of a path that gave no document: nothing but
// blanks, comments and separators, which is what a command that failed
// before a pipe leaves, never what one means to check. in is the path's
// last input.
func emptyInput(in input) doc {
	name, what := in.name, "the file holds no objects"
	switch {
	case in.dir != "":
		name, what = in.dir, "the directory's *.yaml, *.yml and *.json files hold no objects"
	case in.name == "-":
		what = "standard input holds no objects"
	}
	return doc{err: &Error{Source: Source{File: name, Item: -1}, Detail: what, Empty: true}}
}

// splitYAMLFrom appends the YAML documents of data[start:], numbering them
// from doc and counting lines from the start of data.
func splitYAMLFrom(name string, data []byte, start, doc0 int, maxBytes int, docs []doc) []doc {
	firstLine := 1 + bytes.Count(data[:start], []byte("\n"))
	for n, c := range splitYAML(data[start:], firstLine) {
		d := doc{src: Source{File: name, Doc: doc0 + n, Item: -1, Line: c.line}, data: c.data, yaml: true, max: maxBytes}
		if c.err != "" {
			d.err = &Error{Source: d.src, Detail: c.err}
		}
		docs = append(docs, d)
	}
	return docs
}

// yamlStart is where apimachinery's YAMLOrJSONDecoder resumes as YAML after
// the JSON value ending at end: past the blanks that follow it, up to and
// including the first line break.
func yamlStart(data []byte, end int) int {
	for i := end; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 || !unicode.IsSpace(r) {
			return i
		}
		i += size
		if r == '\n' {
			return i
		}
	}
	return len(data)
}

// splitJSON cuts a stream of concatenated JSON values. It only skips over
// values (one cheap pass); each document is validated by its worker (see
// units), and a document that fails validation ends its input, because
// after a syntax error the cut points cannot be trusted.
//
// In fast mode, a document that is an object has its members (and the
// elements of its array members) listed in the same pass, so that a big
// List is not scanned again to find its items. The cut is the same: the
// object's end found by scanObject is where skipValue ends too.
func splitJSON(name string, data []byte, docs []doc, fast bool, maxBytes int) []doc {
	counted, line := 0, 1 // newlines counted in data[:counted]
	lineAt := func(off int) int {
		off = min(max(off, counted), len(data))
		line += bytes.Count(data[counted:off], []byte("\n"))
		counted = off
		return line
	}
	prevEnd := 0
	for n, i := 1, skipSpace(data, 0); i < len(data); n++ {
		src := Source{File: name, Doc: n, Item: -1, Line: lineAt(i)}
		var members []member
		end, ok := 0, false
		if fast && data[i] == '{' {
			members, end, ok = scanObject(data, i, true)
		}
		parsed := ok
		if !ok {
			end, ok = skipValue(data, i)
		}
		if !ok {
			// Unterminated; validation will say where it breaks.
			end = len(data)
		}
		docs = append(docs, doc{src: src, data: data[i:end], json: true, members: members, parsed: parsed,
			file: data, prevEnd: prevEnd, nth: n, max: maxBytes})
		prevEnd = end
		i = skipSpace(data, end)
	}
	return docs
}

// jsonSyntaxError describes why data is not valid JSON, with the line
// counted from the start of the file.
func jsonSyntaxError(data []byte, firstLine int) string {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	if err == nil {
		return "invalid JSON"
	}
	at := len(data)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at = min(max(int(se.Offset)-1, 0), len(data)) // Offset is just past the bad byte
	}
	line := firstLine + bytes.Count(data[:at], []byte("\n"))
	return "invalid JSON at line " + strconv.Itoa(line) + ": " + err.Error()
}

// header is what is read of an object before decoding it.
type header struct {
	apiVersion, kind, name string
}

// readHeader finds apiVersion, kind and metadata.name among an object's
// members. Like encoding/json, the last of duplicated members counts; the
// duplicate itself is reported by the strict decode.
func readHeader(members []member) (h header, errs []fieldError) {
	for _, m := range members {
		switch m.key {
		case "apiVersion", "kind":
			s, ok := stringValue(m.val)
			if !ok {
				errs = append(errs, fieldError{m.key, "wrong type: expected string, found " + jsonType(m.val)})
				continue
			}
			if m.key == "kind" {
				h.kind = s
			} else {
				h.apiVersion = s
			}
		case "metadata":
			meta, _ := objectMembers(m.val)
			for _, mm := range meta {
				if mm.key == "name" {
					h.name, _ = stringValue(mm.val)
				}
			}
		}
	}
	if len(errs) == 0 {
		if h.apiVersion == "" {
			errs = append(errs, fieldError{"apiVersion", "missing; every object needs apiVersion and kind"})
		}
		if h.kind == "" {
			errs = append(errs, fieldError{"kind", "missing; every object needs apiVersion and kind"})
		}
	}
	return h, errs
}

var listFields = map[string]reflect.Type{
	"apiVersion": reflect.TypeFor[string](),
	"kind":       reflect.TypeFor[string](),
	"metadata":   reflect.TypeFor[metav1.ListMeta](),
	"items":      reflect.TypeFor[[]json.RawMessage](),
}

// units parses a document, converting YAML to JSON, and returns the
// objects it holds: itself, or the items of a List.
//
// The items of a List are returned with their header still to be read
// (unit.list), so that reading it is spread over the workers too.
func (d *doc) units(fast bool) ([]unit, []*Error) {
	if d.err != nil {
		return nil, []*Error{d.err}
	}
	data := d.data
	if d.yaml && len(data) > d.max && !mayBeList(data) {
		// Checked before parsing, so that a huge document costs no more
		// than reading it. A List is judged by the size of its items.
		return nil, []*Error{{Source: d.src, Detail: tooLarge(len(data), d.max)}}
	}
	if d.json && !fast && !json.Valid(data) {
		return nil, []*Error{{Source: d.src, Detail: jsonSyntaxError(data, d.src.Line)}}
	}
	var buf *[]byte // pooled memory that holds data, if any
	if d.yaml {
		j, ok := []byte(nil), false
		if fast {
			buf = jsonBuffers.Get().(*[]byte)
			if j, ok = fastYAMLToJSONInto(*buf, d.data); ok {
				*buf = j
			} else {
				jsonBuffers.Put(buf)
				buf = nil
			}
		}
		if !ok {
			var err error
			if j, err = yamlToJSON(chunk{data: d.data, line: d.src.Line}); err != nil {
				return nil, []*Error{{Source: d.src, Detail: explainYAMLError(d.data, err)}}
			}
		}
		data = j
	}
	members, ok := d.members, d.parsed
	if !ok {
		members, ok = objectMembers(data)
	}
	if !ok {
		return nil, []*Error{{Source: d.src, Detail: "expected an object with apiVersion and kind, found " + jsonType(data)}}
	}
	h, ferrs := readHeader(members)
	if len(ferrs) > 0 {
		return nil, wrap(d.src, h, ferrs)
	}
	list, itemKind := isList(h.apiVersion, h.kind)
	if list && judged(h.apiVersion, h.kind) {
		// ResourceSliceList and the like are lists; a kind that merely ends
		// in "List" is not, when its group has a kind of that name.
		list = false
	}
	if !list {
		if len(data) > d.max {
			return nil, []*Error{{Source: d.src, Kind: h.kind, Name: h.name, Detail: tooLarge(len(data), d.max)}}
		}
		u, errs := objectUnit(d.src, h, data)
		if errs != nil {
			return nil, errs
		}
		if buf != nil && u.kind != nil && u.kind.kind == api.KindSlice {
			// A slice keeps nothing of its JSON (see decode), so it is
			// decoded here and the memory goes back to the pool: the JSON
			// of a big YAML input is never all in memory at once.
			obj, errs := u.decode(fast)
			u.data, u.decoded = nil, &unitResult{obj: obj, errs: errs}
			jsonBuffers.Put(buf)
		}
		return []unit{u}, nil
	}
	if itemKind != "" && judged(h.apiVersion, itemKind) && lookupKind(h.apiVersion, itemKind) == nil {
		return nil, []*Error{{Source: d.src, Kind: h.kind, Name: h.name, Detail: kindError(h.apiVersion, itemKind)}}
	}

	var items []byte
	var elems [][]byte
	itemsListed := false
	seen := map[string]bool{}
	for _, m := range members {
		if seen[m.key] {
			ferrs = append(ferrs, fieldError{m.key, "duplicate field"})
			continue
		}
		seen[m.key] = true
		switch m.key {
		case "apiVersion", "kind":
		case "metadata":
			ferrs = locate(m.val, listFields["metadata"], "metadata", ferrs)
		case "items":
			items = m.val
			elems, itemsListed = m.elems, m.isArray
		default:
			detail := "unknown field"
			if s := closest(m.key, listFields); s != "" {
				detail += "; did you mean " + quote(s) + "?"
			}
			ferrs = append(ferrs, fieldError{m.key, detail})
		}
	}
	errs := wrap(d.src, h, ferrs)
	if items == nil || jsonType(items) == "null" {
		return nil, errs
	}
	if !itemsListed {
		elems, ok = arrayElements(items)
	}
	if !ok {
		return nil, append(errs, wrap(d.src, h, []fieldError{{"items", "wrong type: expected array, found " + jsonType(items)}})...)
	}
	var units []unit
	if len(elems) > 0 {
		units = make([]unit, len(elems))
	}
	lh := &header{apiVersion: h.apiVersion, kind: h.kind, name: h.name}
	for i, e := range elems {
		src := d.src
		src.Item = i
		units[i] = unit{src: src, data: e, list: lh, itemKind: itemKind, max: d.max}
	}
	return units, errs
}

// objectUnit is the unit of one object whose header has been read: an
// object dractl judges, or one read leniently.
func objectUnit(src Source, h header, data []byte) (unit, []*Error) {
	if k := lookupKind(h.apiVersion, h.kind); k != nil {
		return unit{src: src, data: data, kind: k, name: h.name}, nil
	}
	if judged(h.apiVersion, h.kind) {
		return unit{}, []*Error{{Source: src, Kind: h.kind, Name: h.name, Detail: kindError(h.apiVersion, h.kind)}}
	}
	if h.name == "" {
		return unit{}, []*Error{{Source: src, Kind: h.kind, Field: "metadata.name", Detail: "missing; every object needs a name"}}
	}
	return unit{src: src, data: data, other: &h, name: h.name}, nil
}

// tooLarge explains the size limit.
func tooLarge(size, limit int) string {
	return fmt.Sprintf("the object is %s, more than the %s that kube-apiserver accepts in one request; it was not read (the limit can be raised)",
		byteSize(size), byteSize(limit))
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	default:
		return strconv.Itoa(n) + " bytes"
	}
}

// mayBeList reports whether a YAML document could be a List: whether a
// line at the top level says kind: ...List. A document that cannot be is
// judged by its size without being parsed.
func mayBeList(data []byte) bool {
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("kind:"))
		if !ok {
			continue
		}
		v := bytes.Trim(bytes.TrimSpace(rest), `"'`)
		if bytes.HasSuffix(v, []byte("List")) {
			return true
		}
	}
	return false
}

// listItem reads the header of one List item. Items of a typed list (e.g.
// ResourceSliceList) may leave out apiVersion and kind, as list responses
// of the API server do; items of a v1 List must name them.
func listItem(list header, itemKind string, data []byte) (unit, header, []fieldError) {
	u := unit{data: data}
	members, ok := objectMembers(data)
	if !ok {
		return u, header{kind: itemKind}, []fieldError{{"", "expected an object, found " + jsonType(data)}}
	}
	h, ferrs := readHeader(members)
	u.name = h.name
	if itemKind != "" {
		ferrs = slices.DeleteFunc(ferrs, func(fe fieldError) bool { return strings.HasPrefix(fe.detail, "missing") })
		if h.apiVersion == "" {
			h.apiVersion = list.apiVersion
		}
		if h.kind == "" {
			h.kind = itemKind
		}
		if h.apiVersion != list.apiVersion {
			ferrs = append(ferrs, fieldError{"apiVersion", "expected " + quote(list.apiVersion) + " as in the " + list.kind + ", found " + quote(h.apiVersion)})
		}
		if h.kind != itemKind {
			ferrs = append(ferrs, fieldError{"kind", "expected " + quote(itemKind) + " in a " + list.kind + ", found " + quote(h.kind)})
		}
	}
	if len(ferrs) > 0 {
		return u, h, ferrs
	}
	if l, _ := isList(h.apiVersion, h.kind); l && !judged(h.apiVersion, h.kind) {
		return u, h, []fieldError{{"kind", "a list inside a list is not supported"}}
	}
	if u.kind = lookupKind(h.apiVersion, h.kind); u.kind == nil {
		if judged(h.apiVersion, h.kind) {
			return u, h, []fieldError{{"", kindError(h.apiVersion, h.kind)}}
		}
		if h.name == "" {
			return u, h, []fieldError{{"metadata.name", "missing; every object needs a name"}}
		}
		u.other = &h
	}
	return u, h, nil
}

func wrap(src Source, h header, ferrs []fieldError) []*Error {
	out := make([]*Error, len(ferrs))
	for i, fe := range ferrs {
		out[i] = &Error{Source: src, Kind: h.kind, Name: h.name, Field: fe.path, Detail: fe.detail}
	}
	return out
}

// decode decodes one object strictly, then makes it look stored. An item
// of a List has its header read first. In fast mode, kinds that allow it
// are tried on the fast decoder first (see fastjson.go); the strict
// decoder decodes whatever that does not accept.
func (u *unit) decode(fast bool) (Object, []*Error) {
	if u.decoded != nil {
		return u.decoded.obj, u.decoded.errs
	}
	if u.list != nil {
		if u.max > 0 && len(u.data) > u.max {
			return Object{}, []*Error{{Source: u.src, Kind: u.itemKind, Detail: tooLarge(len(u.data), u.max)}}
		}
		iu, ih, ferrs := listItem(*u.list, u.itemKind, u.data)
		if len(ferrs) > 0 {
			return Object{}, wrap(u.src, ih, ferrs)
		}
		u.kind, u.name, u.other = iu.kind, iu.name, iu.other
	}
	if u.other != nil {
		return checkNames(u.decodeOther())
	}
	k := u.kind
	v := reflect.New(k.typ)
	if !fast || !k.fast || !decodeFast(u.data, v.Interface()) {
		v = reflect.New(k.typ)
		if ferrs := decodeStrict(u.data, k.typ, v.Interface()); len(ferrs) > 0 {
			return Object{}, wrap(u.src, header{kind: k.kind, name: u.name}, ferrs)
		}
	}
	o := v.Interface().(apiObject)
	o.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(k.apiVersion, k.kind))
	if k.older {
		v1, err := convert.UpgradeToV1(o.(kruntime.Object))
		if err != nil {
			return Object{}, []*Error{{Source: u.src, Kind: k.kind, Name: u.name, Detail: err.Error()}}
		}
		if s, ok := v1.(*resourcev1.ResourceSlice); ok {
			o = api.FromUpstream(s)
		} else {
			o = v1.(apiObject)
		}
	}
	normalize(o, k)
	SetDefaults(o)
	obj := Object{Source: u.src, APIVersion: k.apiVersion, Kind: k.kind, Name: o.GetName(), Namespace: o.GetNamespace(), Obj: o}
	if k.kind != api.KindSlice {
		// Slices are most of the input and are always rewritten when
		// printed; everything else may be printed as it was written.
		obj.Raw = u.data
	}
	return checkNames(obj, nil)
}

// checkNames rejects an object whose name or namespace holds a
// placeholder of a templated file.
func checkNames(obj Object, errs []*Error) (Object, []*Error) {
	if len(errs) > 0 {
		return obj, errs
	}
	for _, fe := range []*fieldError{placeholderError("metadata.name", obj.Name), placeholderError("metadata.namespace", obj.Namespace)} {
		if fe != nil {
			errs = append(errs, &Error{Source: obj.Source, Kind: obj.Kind, Name: obj.Name, Field: fe.path, Detail: fe.detail})
		}
	}
	if len(errs) > 0 {
		return Object{}, errs
	}
	return obj, nil
}

// decodeStrict decodes data into v, a new *t, with sigs.k8s.io/json's
// strict mode, and returns every problem with its field path.
func decodeStrict(data []byte, t reflect.Type, v any) []fieldError {
	strict, err := kjson.UnmarshalStrict(data, v)
	if err == nil {
		return strictErrors("", strict, t, nil)
	}
	if ferrs := locate(data, t, "", nil); len(ferrs) > 0 {
		return ferrs
	}
	return []fieldError{{"", err.Error()}}
}

// decodeOther reads an object of a kind dractl does not judge: any valid
// JSON object with apiVersion, kind and metadata.name.
func (u *unit) decodeOther() (Object, []*Error) {
	var m map[string]any
	if err := json.Unmarshal(u.data, &m); err != nil {
		return Object{}, []*Error{{Source: u.src, Kind: u.other.kind, Name: u.name, Detail: err.Error()}}
	}
	o := &unstructured.Unstructured{Object: m}
	return Object{Source: u.src, APIVersion: u.other.apiVersion, Kind: u.other.kind, Name: u.name, Namespace: o.GetNamespace(), Obj: o, Raw: u.data}, nil
}
