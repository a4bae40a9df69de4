package decode

import (
	jsonv2 "github.com/go-json-experiment/json"
)

// The fast path decodes an object with github.com/go-json-experiment/json
// (the basis of encoding/json/v2), which is several times faster than
// sigs.k8s.io/json's strict mode on ResourceSlices: it finds duplicate
// members without building a set per object and allocates far less.
//
// It is strict in the same way: member names match case-sensitively,
// unknown and duplicate members are errors, and so are invalid UTF-8 and
// everything sigs.k8s.io/json rejects. It is used only to accept: an
// object it accepts decodes to exactly what the strict decoder produces
// (FuzzFastObjectMatchesStrict proves it for every kind that takes this
// path), and an object it rejects, or that it judges differently for any
// reason, is decoded again by the strict decoder, whose errors (paths,
// suggestions, every bad value) are the ones reported. So the fast path
// can only save time, never change an answer.

// fastOptions are strict decoding in encoding/json/v2 terms; duplicate
// names and invalid UTF-8 are rejected by default.
var fastOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
)

// decodeFast decodes data into v (a pointer to a new object) and reports
// whether it succeeded. On failure v may be partly filled in and must be
// discarded.
func decodeFast(data []byte, v any) bool {
	d := fastDecoders.Get().(*fastDecoder)
	defer fastDecoders.Put(d)
	return jsonv2.Unmarshal(data, v, d.opts) == nil
}
