// Package admit is the admission pipeline every verb that reads manifests
// shares: what decoding could not read, each object's admission rules and
// warnings (pkg/core/validation), and the rules that span a pool's slices
// (pkg/core/pool), gathered into one Report of Problems that the CLI prints as
// text or JSON and the allocating verbs use to refuse bad input.
package admit

import (
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/core/workload"
)

// Review finds every Problem of the input as the newest supported
// kube-apiserver judges it. An error that only some supported minors make
// names them (Problem.RefusedBy, and in its text), and when the minors'
// verdicts on the input differ the report gives each (Report.Verdicts).
func Review(objects []decode.Object, decodeErrors []*decode.Error) *Report {
	newest := validation.Newest()
	r := reviewAs(newest, true, objects, decodeErrors)
	differs := false
	for _, p := range r.Problems {
		differs = differs || len(p.RefusedBy) > 0
	}
	if !differs {
		return r
	}
	for _, v := range validation.Supported() {
		o := r
		if v != newest {
			o = reviewAs(v, false, objects, decodeErrors)
		}
		r.Verdicts = append(r.Verdicts, Verdict{KubeVersion: v.String(), Valid: o.Valid, Errors: o.Summary.Errors})
	}
	return r
}

// ReviewAt finds every Problem of the input as kube-apiserver v judges it.
func ReviewAt(v validation.KubeVersion, objects []decode.Object, decodeErrors []*decode.Error) *Report {
	r := reviewAs(v, false, objects, decodeErrors)
	r.KubeVersion = v.String()
	return r
}

// ReviewFor is ReviewAt for a named minor and Review without one.
func ReviewFor(v *validation.KubeVersion, objects []decode.Object, decodeErrors []*decode.Error) *Report {
	if v == nil {
		return Review(objects, decodeErrors)
	}
	return ReviewAt(*v, objects, decodeErrors)
}

// reviewAs judges as v; with annotate, errors of rules that changed between
// the supported minors say which refuse them.
func reviewAs(v validation.KubeVersion, annotate bool, objects []decode.Object, decodeErrors []*decode.Error) *Report {
	r := &Report{APIVersion: ReportAPIVersion, Kind: "ValidationReport", Problems: []Problem{}}
	var (
		badObjects = make(map[string]bool)
		reported   = make(map[*api.ResourceSlice]map[string]bool)
		slices     []*api.ResourceSlice
		sourceOf   = make(map[*api.ResourceSlice]*decode.Object)
	)
	// A document that did not decode is still an object the user wrote;
	// count it once however many errors it has.
	undecoded := make(map[string]bool)
	for _, e := range decodeErrors {
		p := sourceProblem("error", e.Source, ProblemDecode)
		p.Kind, p.Name, p.Field, p.Message, p.Text = e.Kind, e.Name, e.Field, e.Detail, OneLine(e.Error())
		r.add(p)
		// Problems with a whole file or directory are about no document.
		if e.Source.Doc > 0 {
			badObjects[e.Source.String()] = true
			undecoded[e.Source.String()] = true
		}
	}

	objErrs := ObjectsAt(v, objects)
	nsWarnings := NamespaceWarnings(objects)
	for i := range objects {
		obj := &objects[i]
		errs := objErrs[i]
		for _, e := range errs {
			p := fieldProblem(objectProblem("error", obj, ""), e)
			p.Text = fmt.Sprintf("%s: %s", Where(obj), OneLine(e.Error()))
			if by := validation.RefusedBy(e); annotate && by != nil {
				p.RefusedBy = versionNames(by)
				p.Text += fmt.Sprintf(" (kube-apiserver %s; %s accepts it)", strings.Join(p.RefusedBy, ", "), strings.Join(versionNames(validation.AcceptedBy(e)), ", "))
			}
			r.add(p)
		}
		for _, wn := range append(WarningsAt(v, obj), nsWarnings[i]...) {
			p := objectProblem("warning", obj, ProblemWarning)
			p.Field, p.Message = wn.Field, wn.Message
			p.Text = fmt.Sprintf("warning: %s: %s", Where(obj), OneLine(wn.String()))
			r.add(p)
		}
		if len(errs) > 0 {
			badObjects[Where(obj)] = true
		}
		if s, ok := obj.Obj.(*api.ResourceSlice); ok {
			slices = append(slices, s)
			sourceOf[s] = obj
			// Pool validation finds some of the same problems (an unknown
			// include breaks both); say each once.
			seen := make(map[string]bool, len(errs))
			for _, e := range errs {
				seen[errorKey(e)] = true
			}
			reported[s] = seen
		}
	}

	pools := pool.Assemble(slices)
	poolErrs := pool.ValidateAll(pools)
	for i, p := range pools {
		complete := p.Complete()
		if !complete {
			pr := Problem{Severity: "warning", Pool: p.ID.String(), Type: ProblemPoolIncomplete, Message: Completeness(p)}
			pr.Text = fmt.Sprintf("warning: pool %s: %s", p.ID, pr.Message)
			r.add(pr)
		}
		perr := poolErrs[i]
		if perr == nil {
			for _, w := range p.OrderWarnings() {
				pr := Problem{Severity: "warning", Pool: p.ID.String(), Kind: api.KindSlice, Name: w.Slice, Type: ProblemWarning, Field: w.Field, Message: w.Message}
				loc := ""
				if cands := slicesNamed(p, w.Slice); len(cands) == 1 {
					if src := sourceOf[cands[0].ResourceSlice]; src != nil {
						pr.File, pr.Document, pr.Line = src.Source.File, src.Source.Doc, src.Source.Line
						loc = " (" + src.Source.String() + ")"
					}
				}
				pr.Text = fmt.Sprintf("warning: pool %s: ResourceSlice %s%s: %s: %s", p.ID, w.Slice, loc, w.Field, w.Message)
				r.add(pr)
			}
			continue
		}
		n := 0
		for _, prob := range perr.Problems {
			cands := slicesNamed(p, prob.Slice)
			if len(cands) == 1 && reported[cands[0].ResourceSlice][errorKey(prob.Err)] {
				continue
			}
			var locs []string
			for _, c := range cands {
				if src := sourceOf[c.ResourceSlice]; src != nil {
					locs = append(locs, src.Source.String())
				}
			}
			pr := Problem{Severity: "error", Pool: p.ID.String(), Kind: api.KindSlice, Name: prob.Slice}
			if len(cands) > 0 {
				if src := sourceOf[cands[0].ResourceSlice]; src != nil {
					pr.File, pr.Document, pr.Line = src.Source.File, src.Source.Doc, src.Source.Line
				}
			}
			pr = fieldProblem(pr, prob.Err)
			// A pool that misses slices cannot resolve what they hold: its
			// references are not errors yet (KEP-4815 "Validation" judges
			// complete pools only).
			unresolved := !complete && prob.Err.Type == field.ErrorTypeNotFound
			if unresolved {
				pr.Severity = "warning"
				pr.Message += " (the pool is incomplete: it may be in a slice not published yet)"
			}
			loc := ""
			switch {
			case len(locs) == 1:
				loc = " (" + locs[0] + ")"
				if !unresolved {
					badObjects[Where(sourceOf[cands[0].ResourceSlice])] = true
				}
			case len(locs) > 1:
				// Problems name their slice only; with several slices of
				// that name there is no telling which one is meant.
				loc = " (one of " + strings.Join(locs, ", ") + ")"
				if !unresolved {
					badObjects["pool "+p.ID.String()+" ResourceSlice "+prob.Slice] = true
				}
			}
			line := fmt.Sprintf("pool %s: ResourceSlice %s%s: %s", p.ID, prob.Slice, loc, OneLine(prob.Err.Error()))
			if unresolved {
				pr.Text = "warning: " + line + " (the pool is incomplete: it may be in a slice not published yet)"
			} else {
				pr.Text = line
				n++
			}
			r.add(pr)
		}
		if n > 0 {
			r.Summary.InvalidPools++
		}
	}
	r.Summary.Objects = len(objects) + len(undecoded)
	r.Summary.Pools = len(pools)
	r.Summary.InvalidObjects = len(badObjects)
	r.Valid = r.Summary.Errors == 0
	return r
}

func versionNames(vs []validation.KubeVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

// Objects runs the admission rules of every object as the newest
// supported kube-apiserver; see ObjectsAt.
func Objects(objs []decode.Object) []field.ErrorList {
	return ObjectsAt(validation.Newest(), objs)
}

// ObjectsAt runs kube-apiserver v's admission rules of every object; the
// result's i-th list is objs[i]'s. ResourceSlices, which are most of a
// cluster's objects, are validated in parallel. Rules that read a claim's
// Namespace apply when the input holds it (see NamespaceWarnings).
func ObjectsAt(v validation.KubeVersion, objs []decode.Object) []field.ErrorList {
	out := make([]field.ErrorList, len(objs))
	var slices []*api.ResourceSlice
	var at []int
	namespaces := namespacesOf(objs)
	for i := range objs {
		if s, ok := objs[i].Obj.(*api.ResourceSlice); ok {
			slices = append(slices, s)
			at = append(at, i)
			continue
		}
		out[i] = ObjectAt(v, &objs[i])
		for _, a := range adminAccess(&objs[i]) {
			if labels, ok := namespaces[objs[i].Namespace]; ok {
				out[i] = append(out[i], validation.AdminAccessNamespace(a, objs[i].Namespace, labels)...)
			}
		}
	}
	for j, errs := range v.ResourceSlices(slices) {
		out[at[j]] = errs
	}
	return out
}

// Object runs the newest supported kube-apiserver's admission rules of
// the object's kind; see ObjectAt.
func Object(obj *decode.Object) field.ErrorList { return ObjectAt(validation.Newest(), obj) }

// ObjectAt runs kube-apiserver v's admission rules of the object's kind.
// Kinds dractl has no rules for pass: admission of core kinds is kubectl's
// job.
func ObjectAt(v validation.KubeVersion, obj *decode.Object) field.ErrorList {
	switch o := obj.Obj.(type) {
	case *api.ResourceSlice:
		return v.ResourceSlice(o)
	case *resourcev1.DeviceClass:
		return v.DeviceClass(o)
	case *resourcev1.ResourceClaim:
		return v.ResourceClaim(o)
	case *resourcev1.ResourceClaimTemplate:
		return v.ResourceClaimTemplate(o)
	case *workload.Workload:
		return workload.Validate(o)
	}
	return nil
}

// Warnings returns what the newest supported kube-apiserver admits
// although a KEP or the API reference advises against it.
func Warnings(obj *decode.Object) []validation.Warning {
	return WarningsAt(validation.Newest(), obj)
}

// WarningsAt is Warnings for kube-apiserver v.
func WarningsAt(v validation.KubeVersion, obj *decode.Object) []validation.Warning {
	switch o := obj.Obj.(type) {
	case *api.ResourceSlice:
		return v.ResourceSliceWarnings(o)
	case *resourcev1.ResourceClaim:
		return v.ResourceClaimWarnings(o)
	case *resourcev1.ResourceClaimTemplate:
		return v.ResourceClaimTemplateWarnings(o)
	}
	return nil
}

// namespacesOf is the labels of the input's Namespaces, by name.
func namespacesOf(objs []decode.Object) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i := range objs {
		if u, ok := objs[i].Obj.(*unstructured.Unstructured); ok && objs[i].Kind == "Namespace" && objs[i].APIVersion == "v1" {
			out[u.GetName()] = u.GetLabels()
		}
	}
	return out
}

// adminAccess is where a claim or template asks for admin access to
// devices: its first request that does, and a claim's first allocated
// result that has it.
func adminAccess(obj *decode.Object) []*field.Path {
	var paths []*field.Path
	switch o := obj.Obj.(type) {
	case *resourcev1.ResourceClaim:
		paths = append(paths, validation.AdminAccessRequest(&o.Spec.Devices, field.NewPath("spec")), validation.AdminAccessResult(o.Status.Allocation))
	case *resourcev1.ResourceClaimTemplate:
		paths = append(paths, validation.AdminAccessRequest(&o.Spec.Spec.Devices, field.NewPath("spec")))
	}
	return slices.DeleteFunc(paths, func(p *field.Path) bool { return p == nil })
}

// NamespaceWarnings are the rules of Objects that need the object's
// Namespace, when the input does not hold it: kube-apiserver would check
// them against the cluster's namespace, which a file cannot show.
func NamespaceWarnings(objs []decode.Object) [][]validation.Warning {
	out := make([][]validation.Warning, len(objs))
	namespaces := namespacesOf(objs)
	for i := range objs {
		if _, ok := namespaces[objs[i].Namespace]; ok {
			continue
		}
		for _, a := range adminAccess(&objs[i]) {
			out[i] = append(out[i], validation.Warning{Field: a.String(), Message: fmt.Sprintf(
				"kube-apiserver grants admin access only in a namespace labelled %s: \"true\"; Namespace %s is not in the input, so that is not checked here",
				resourcev1.DRAAdminNamespaceLabelKey, objs[i].Namespace)})
		}
	}
	return out
}

// errorKey identifies an error by where and what, not by its wording,
// because admission and pool validation phrase the same Problem differently.
func errorKey(e *field.Error) string {
	return string(e.Type) + " " + e.Field
}

// slicesNamed finds the slices a pool Problem may be about: normally one,
// several only in an input that publishes two slices of one name.
func slicesNamed(p *pool.Pool, name string) []*pool.Slice {
	var found []*pool.Slice
	for _, s := range p.Slices {
		if s.Name == name {
			found = append(found, s)
		}
	}
	return found
}

// completeness explains why a pool is not complete. The scheduler skips such
// a pool rather than use part of it; fewer slices is normal while a driver
// publishes, more means two publishers or slices from different inputs.
func Completeness(p *pool.Pool) string {
	if int64(len(p.Slices)) < p.SliceCount {
		return fmt.Sprintf("incomplete: %d of %d slices of generation %d found; the scheduler ignores the pool until all are published",
			len(p.Slices), p.SliceCount, p.Generation)
	}
	return fmt.Sprintf("%d slices of generation %d found where resourceSliceCount is %d; the scheduler ignores the pool",
		len(p.Slices), p.Generation, declaredSliceCount(p))
}

// declaredSliceCount is the largest resourceSliceCount the pool's slices
// state, as written: pool.Pool.SliceCount never goes below zero, and a
// user who wrote -3 should read -3.
func declaredSliceCount(p *pool.Pool) int64 {
	if len(p.Slices) == 0 {
		return p.SliceCount
	}
	n := p.Slices[0].Spec.Pool.ResourceSliceCount
	for _, s := range p.Slices[1:] {
		n = max(n, s.Spec.Pool.ResourceSliceCount)
	}
	return n
}

// Where locates an object the way every dractl message does:
// "<file>#<doc> <Kind>/<name>".
func Where(obj *decode.Object) string {
	return fmt.Sprintf("%s %s/%s", obj.Source, obj.Kind, obj.Name)
}
