package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/pool"
	"github.com/dractl/dractl/pkg/validation"
	"github.com/dractl/dractl/pkg/workload"
)

func newValidateCommand(o *globalOptions) *cobra.Command {
	var output string
	var liveFlag bool
	var cluster *clusterOptions
	cmd := &cobra.Command{
		Use:   "validate (-f FILE|DIR|- ... | --live)",
		Short: "Check objects against admission rules and pools against KEP-4815",
		Long: `validate decodes every input strictly (unknown and duplicate fields are
errors), checks each object as kube-apiserver admission would, then groups
the ResourceSlices into pools and checks the rules that span slices: device
and counter set names unique in a pool, consumed counter sets and counters
that exist, a consistent resourceSliceCount. Objects of kinds dractl has no
rules for (Namespace, Deployment, ...) are read, counted and otherwise left
alone; resource.k8s.io v1beta1 and v1beta2 objects are converted to v1 first.

Every error is printed on its own line as
  <file>#<doc> <Kind>/<name>: <field path>: <message>
or, for rules that span the slices of a pool,
  pool <driver>/<pool>: ResourceSlice <name> (<file>#<doc>): <field path>: <message>
followed by a summary line. Incomplete pools (fewer slices than
resourceSliceCount) are warnings: the scheduler skips them, which is
legitimate while a driver is still publishing; so are references such a
pool cannot resolve yet (a counter set may be in a slice still to come).
Objects that kube-apiserver accepts but that break a rule of the DRA KEPs or
API reference get
  warning: <file>#<doc> <Kind>/<name>: <field path>: <message>
lines; warnings never change the exit code.

-o json prints one ValidationReport object instead, for CI pipelines; its
schema is in docs/output.md.

With --live, validate reads every ResourceSlice, DeviceClass,
ResourceClaim and ResourceClaimTemplate of the cluster (kubectl's flags:
--kubeconfig, --context, ...) instead of files; objects are located as
"cluster <Kind>/<name>". The API server has admitted them, so what is
left to find is mostly what spans slices: invalid and incomplete pools.
A cluster that cannot be read exits 2.`,
		Example: `  dractl validate -f examples/a100-mig-mixins
  kubectl get resourceslices -o yaml | dractl validate -f -
  dractl validate -f examples/gpu-partitions -o json | jq '.problems[] | select(.severity == "error")'
  dractl validate --live --context prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if liveFlag && len(o.filenames) > 0 {
				return usageErrorf("--live: not with -f; validate reads either the cluster or files")
			}
			if !liveFlag {
				if err := o.requireInputs(); err != nil {
					return err
				}
			}
			if output != "" && output != "json" {
				return usageErrorf("--output: expected json, found %q", output)
			}
			var in *input
			var err error
			if liveFlag {
				in, err = readLive(cmd.Context(), cluster)
			} else {
				in, err = o.read()
			}
			if err != nil {
				return err
			}
			r := runValidate(in)
			if output == "json" {
				if err := writeJSON(o.Out, r); err != nil {
					return writeError(err)
				}
			} else {
				r.writeText(o.Out)
			}
			if !r.Valid {
				return invalid()
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (default: one line per problem and a summary)")
	cmd.Flags().BoolVar(&liveFlag, "live", false, "validate the DRA objects of the cluster instead of files")
	cluster = addClusterFlags(cmd)
	return cmd
}

// validationReport is what validate finds. Its JSON form is a documented,
// stable interface (docs/output.md): fields may be added, never renamed.
type validationReport struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Valid      bool              `json:"valid"`
	Summary    validationSummary `json:"summary"`
	Problems   []problem         `json:"problems"`
}

type validationSummary struct {
	Objects        int `json:"objects"`
	Pools          int `json:"pools"`
	Errors         int `json:"errors"`
	Warnings       int `json:"warnings"`
	InvalidObjects int `json:"invalidObjects"`
	InvalidPools   int `json:"invalidPools"`
}

// reportAPIVersion versions the JSON reports of validate and explain.
const reportAPIVersion = "dractl.dev/v1alpha1"

// problem is one error or warning. text is its line in the default output.
type problem struct {
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
	// Type classifies the problem: a field.ErrorType of apimachinery
	// (FieldValueInvalid, FieldValueNotFound, ...) for admission and pool
	// rules, Decode for input that could not be read as an object,
	// Warning for admission warnings, PoolIncomplete for a pool that
	// misses slices.
	Type    string `json:"type"`
	Message string `json:"message"`
	text    string
}

const (
	problemDecode         = "Decode"
	problemWarning        = "Warning"
	problemPoolIncomplete = "PoolIncomplete"
)

func sourceProblem(severity string, src decode.Source, typ string) problem {
	p := problem{Severity: severity, File: src.File, Document: src.Doc, Line: src.Line, Type: typ}
	if src.Item >= 0 {
		item := src.Item
		p.Item = &item
	}
	return p
}

func objectProblem(severity string, obj *decode.Object, typ string) problem {
	p := sourceProblem(severity, obj.Source, typ)
	p.Kind, p.Name, p.Namespace = obj.Kind, obj.Name, obj.Namespace
	return p
}

func fieldProblem(p problem, e *field.Error) problem {
	p.Field, p.Type, p.Message = e.Field, string(e.Type), e.ErrorBody()
	return p
}

func (r *validationReport) add(p problem) {
	r.Problems = append(r.Problems, p)
	if p.Severity == "error" {
		r.Summary.Errors++
	} else {
		r.Summary.Warnings++
	}
}

func (r *validationReport) writeText(w io.Writer) {
	for _, p := range r.Problems {
		fmt.Fprintln(w, p.text)
	}
	fmt.Fprintln(w, summary(r.Summary.Objects, r.Summary.Pools, r.Summary.Errors, r.Summary.InvalidObjects, r.Summary.InvalidPools))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote CEL, which has < and >
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runValidate finds every problem of the input.
func runValidate(in *input) *validationReport {
	r := &validationReport{APIVersion: reportAPIVersion, Kind: "ValidationReport", Problems: []problem{}}
	var (
		badObjects = make(map[string]bool)
		reported   = make(map[*api.ResourceSlice]map[string]bool)
		slices     []*api.ResourceSlice
		sourceOf   = make(map[*api.ResourceSlice]*decode.Object)
	)
	// A document that did not decode is still an object the user wrote;
	// count it once however many errors it has.
	undecoded := make(map[string]bool)
	for _, e := range in.decodeErrors {
		p := problem{Severity: "error", Type: problemDecode, Message: e.line, text: oneLine(e.line)}
		if e.err != nil {
			p = sourceProblem("error", e.err.Source, problemDecode)
			p.Kind, p.Name, p.Field, p.Message, p.text = e.err.Kind, e.err.Name, e.err.Field, e.err.Detail, oneLine(e.line)
		}
		r.add(p)
		if e.where != "" {
			badObjects[e.where] = true
			undecoded[e.where] = true
		}
	}

	objErrs := validateObjects(in.objects)
	for i := range in.objects {
		obj := &in.objects[i]
		errs := objErrs[i]
		for _, e := range errs {
			p := fieldProblem(objectProblem("error", obj, ""), e)
			p.text = fmt.Sprintf("%s: %s", where(obj), oneLine(e.Error()))
			r.add(p)
		}
		for _, wn := range objectWarnings(obj) {
			p := objectProblem("warning", obj, problemWarning)
			p.Field, p.Message = wn.Field, wn.Message
			p.text = fmt.Sprintf("warning: %s: %s", where(obj), oneLine(wn.String()))
			r.add(p)
		}
		if len(errs) > 0 {
			badObjects[where(obj)] = true
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
			pr := problem{Severity: "warning", Pool: p.ID.String(), Type: problemPoolIncomplete, Message: completeness(p)}
			pr.text = fmt.Sprintf("warning: pool %s: %s", p.ID, pr.Message)
			r.add(pr)
		}
		perr := poolErrs[i]
		if perr == nil {
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
			pr := problem{Severity: "error", Pool: p.ID.String(), Kind: api.KindSlice, Name: prob.Slice}
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
					badObjects[where(sourceOf[cands[0].ResourceSlice])] = true
				}
			case len(locs) > 1:
				// Problems name their slice only; with several slices of
				// that name there is no telling which one is meant.
				loc = " (one of " + strings.Join(locs, ", ") + ")"
				if !unresolved {
					badObjects["pool "+p.ID.String()+" ResourceSlice "+prob.Slice] = true
				}
			}
			line := fmt.Sprintf("pool %s: ResourceSlice %s%s: %s", p.ID, prob.Slice, loc, oneLine(prob.Err.Error()))
			if unresolved {
				pr.text = "warning: " + line + " (the pool is incomplete: it may be in a slice not published yet)"
			} else {
				pr.text = line
				n++
			}
			r.add(pr)
		}
		if n > 0 {
			r.Summary.InvalidPools++
		}
	}
	r.Summary.Objects = len(in.objects) + len(undecoded)
	r.Summary.Pools = len(pools)
	r.Summary.InvalidObjects = len(badObjects)
	r.Valid = r.Summary.Errors == 0
	return r
}

// validateObjects runs the admission rules of every object; the result's
// i-th list is objs[i]'s. ResourceSlices, which are most of a cluster's
// objects, are validated in parallel.
func validateObjects(objs []decode.Object) []field.ErrorList {
	out := make([]field.ErrorList, len(objs))
	var slices []*api.ResourceSlice
	var at []int
	for i := range objs {
		if s, ok := objs[i].Obj.(*api.ResourceSlice); ok {
			slices = append(slices, s)
			at = append(at, i)
			continue
		}
		out[i] = validateObject(&objs[i])
	}
	for j, errs := range validation.ResourceSlices(slices) {
		out[at[j]] = errs
	}
	return out
}

// validateObject runs the admission rules of the object's kind. Kinds
// dractl has no rules for pass: admission of core kinds is kubectl's job.
func validateObject(obj *decode.Object) field.ErrorList {
	switch o := obj.Obj.(type) {
	case *api.ResourceSlice:
		return validation.ResourceSlice(o)
	case *resourcev1.DeviceClass:
		return validation.DeviceClass(o)
	case *resourcev1.ResourceClaim:
		return validation.ResourceClaim(o)
	case *resourcev1.ResourceClaimTemplate:
		return validation.ResourceClaimTemplate(o)
	case *workload.Workload:
		return workload.Validate(o)
	}
	return nil
}

// objectWarnings returns what kube-apiserver admits although a KEP or the
// API reference advises against it.
func objectWarnings(obj *decode.Object) []validation.Warning {
	switch o := obj.Obj.(type) {
	case *api.ResourceSlice:
		return validation.ResourceSliceWarnings(o)
	case *resourcev1.ResourceClaim:
		return validation.ResourceClaimWarnings(o)
	case *resourcev1.ResourceClaimTemplate:
		return validation.ResourceClaimTemplateWarnings(o)
	}
	return nil
}

// errorKey identifies an error by where and what, not by its wording,
// because admission and pool validation phrase the same problem differently.
func errorKey(e *field.Error) string {
	return string(e.Type) + " " + e.Field
}

// slicesNamed finds the slices a pool problem may be about: normally one,
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
func completeness(p *pool.Pool) string {
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

func summary(objects, pools, errs, badObjects, badPools int) string {
	head := fmt.Sprintf("%s, %s", plural(objects, "object"), plural(pools, "pool"))
	if errs == 0 {
		return head + ": valid"
	}
	s := fmt.Sprintf("%s: %s", head, plural(errs, "error"))
	if badObjects > 0 {
		// Not every error is in an object: a directory without manifests
		// is an error about no object at all.
		s += fmt.Sprintf(" in %s", plural(badObjects, "object"))
	}
	if badPools > 0 {
		s += fmt.Sprintf(", %s", plural(badPools, "invalid pool"))
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// oneLine keeps each error on one line, so that the report can be grepped
// and counted line by line, even when a message (a CEL compile error with
// its caret display, say) spans several.
func oneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
