package admit

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/decode"
)

// Report is everything the pipeline finds in an input; `dractl validate`
// prints it. Its JSON form is a documented, stable interface
// (docs/output.md): fields may be added, never renamed.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Valid      bool   `json:"valid"`
	// KubeVersion is the kube-apiserver minor the input was judged for
	// when one was named (--kube-version, a live cluster's own).
	KubeVersion string `json:"kubeVersion,omitempty"`
	// Verdicts, when no minor was named, are each supported minor's
	// verdict, given only when they disagree.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	Summary  Summary   `json:"summary"`
	Problems []Problem `json:"problems"`
}

// Verdict is what one kube-apiserver minor says of the whole input.
type Verdict struct {
	KubeVersion string `json:"kubeVersion"`
	Valid       bool   `json:"valid"`
	Errors      int    `json:"errors"`
}

// Summary counts what a Report holds.
type Summary struct {
	Objects        int `json:"objects"`
	Pools          int `json:"pools"`
	Errors         int `json:"errors"`
	Warnings       int `json:"warnings"`
	InvalidObjects int `json:"invalidObjects"`
	InvalidPools   int `json:"invalidPools"`
}

// ReportAPIVersion versions the JSON reports of validate and explain.
const ReportAPIVersion = "dractl.dev/v1alpha1"

// Problem is one error or warning.
type Problem struct {
	Severity string `json:"severity"` // "error" or "warning"
	File     string `json:"file,omitempty"`
	Document int    `json:"document,omitempty"` // 1-based; 0: the whole file
	Item     *int   `json:"item,omitempty"`     // index in a List document
	Line     int    `json:"line,omitempty"`     // where the document starts
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`
	// Namespace is the object's namespace after defaulting.
	Namespace string `json:"namespace,omitempty"`
	// Pool is "<driver>/<pool>" for problems of a pool.
	Pool  string `json:"pool,omitempty"`
	Field string `json:"field,omitempty"`
	// Type classifies the Problem: a field.ErrorType of apimachinery
	// (FieldValueInvalid, FieldValueNotFound, ...) for admission and pool
	// rules, Decode for input that could not be read as an object,
	// Warning for admission warnings, PoolIncomplete for a pool that
	// misses slices.
	Type    string `json:"type"`
	Message string `json:"message"`
	// RefusedBy, when no minor was named, lists the supported
	// kube-apiserver minors that make this error when the others do not.
	RefusedBy []string `json:"refusedBy,omitempty"`
	// Text is the problem's line in the text report.
	Text string `json:"-"`
}

// Problem types beyond apimachinery's field.ErrorType values.
const (
	ProblemDecode         = "Decode"
	ProblemWarning        = "Warning"
	ProblemPoolIncomplete = "PoolIncomplete"
)

func sourceProblem(severity string, src decode.Source, typ string) Problem {
	p := Problem{Severity: severity, File: src.File, Document: src.Doc, Line: src.Line, Type: typ}
	if src.Item >= 0 {
		item := src.Item
		p.Item = &item
	}
	return p
}

func objectProblem(severity string, obj *decode.Object, typ string) Problem {
	p := sourceProblem(severity, obj.Source, typ)
	p.Kind, p.Name, p.Namespace = obj.Kind, obj.Name, obj.Namespace
	return p
}

func fieldProblem(p Problem, e *field.Error) Problem {
	p.Field, p.Type, p.Message = e.Field, string(e.Type), e.ErrorBody()
	return p
}

func (r *Report) add(p Problem) {
	r.Problems = append(r.Problems, p)
	if p.Severity == "error" {
		r.Summary.Errors++
	} else {
		r.Summary.Warnings++
	}
}

// oneLine keeps each error on one line, so that the report can be grepped
// and counted line by line, even when a message (a CEL compile error with
// its caret display, say) spans several.
func OneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
