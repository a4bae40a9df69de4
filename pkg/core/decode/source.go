package decode

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Source says where an object or error came from.
type Source struct {
	// File is the path as given (joined with the directory for directory
	// entries), or "-" for stdin.
	File string
	// Doc is the 1-based number of the document within File, counting only
	// documents that hold something (empty and comment-only YAML documents
	// are not counted). Zero means the error concerns the whole file.
	Doc int
	// Item is the 0-based index within a List document, or -1.
	Item int
	// Line is the 1-based line on which the document starts; zero if
	// unknown. It is not part of String, which stays stable when lines move.
	Line int
}

// String formats the source as "file#doc" or "file#doc items[i]".
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(s.File)
	if s.Doc > 0 {
		b.WriteByte('#')
		b.WriteString(strconv.Itoa(s.Doc))
	}
	if s.Item >= 0 {
		b.WriteString(" items[")
		b.WriteString(strconv.Itoa(s.Item))
		b.WriteByte(']')
	}
	return b.String()
}

// Object is one decoded object.
type Object struct {
	Source Source
	// APIVersion is the object's apiVersion as written. Objects of older
	// resource.k8s.io versions are converted: Obj is then a v1 object.
	APIVersion string
	// Kind is the object's kind, e.g. "ResourceSlice".
	Kind string
	// Name and Namespace are metadata.name and metadata.namespace.
	Name      string
	Namespace string
	// Obj is one of *api.ResourceSlice, *resourcev1.DeviceClass,
	// *resourcev1.ResourceClaim, *resourcev1.ResourceClaimTemplate,
	// *corev1.Node or *corev1.Pod, with apiVersion and kind always set; or,
	// for any other kind, which dractl reads without judging it, an
	// *unstructured.Unstructured.
	Obj any
	// Raw is the object as written, in JSON, for every kind but
	// ResourceSlice: what a command prints for an object it does not
	// rewrite, so that nothing (not even a default) is added to it.
	Raw json.RawMessage
}

// Error is one problem found while reading or decoding.
type Error struct {
	Source Source
	// Kind and Name identify the object when they could be read; either
	// may be empty.
	Kind, Name string
	// Field is the path of the offending field inside the object (or the
	// list document), e.g. "spec.devices[3].consumesCounters[0].counterSet";
	// empty when the problem is not about one field.
	Field string
	// Detail says what is wrong, with the expected and the found value
	// where that helps.
	Detail string
	// Empty marks an input that holds nothing to decode: a file or stdin
	// without a single document, or a directory without manifests. Its
	// content is not wrong, it is missing; callers may treat it as an
	// input that could not be read.
	Empty bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	if e.Kind != "" || e.Name != "" {
		b.WriteByte(' ')
		b.WriteString(e.Kind)
		if e.Name != "" {
			b.WriteByte('/')
			b.WriteString(e.Name)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Detail)
	return b.String()
}

// Errors lists every problem found, in input order. Paths and Bytes return
// it as their error when it is not empty, and a nil error otherwise.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(es)))
	b.WriteString(" errors:")
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes each *Error to errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
