package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/live"
	"github.com/dractl/dractl/pkg/pool"
	"github.com/dractl/dractl/pkg/validation"
)

func newValidateCommand(o *globalOptions) *cobra.Command {
	var liveFlag bool
	var cluster *clusterOptions
	cmd := &cobra.Command{
		Use:   "validate (-f FILE|DIR|- ... | --live)",
		Short: "Check objects against admission rules and pools against KEP-4815",
		Long: `validate decodes every input strictly (unknown and duplicate fields are
errors), checks each object as kube-apiserver admission would, then groups
the ResourceSlices into pools and checks the rules that span slices: device
and counter set names unique in a pool, consumed counter sets and counters
that exist, a consistent resourceSliceCount.

Every error is printed on its own line as
  <file>#<doc> <Kind>/<name>: <field path>: <message>
or, for rules that span the slices of a pool,
  pool <driver>/<pool>: ResourceSlice <name> (<file>#<doc>): <field path>: <message>
followed by a summary line. Incomplete pools (fewer slices than
resourceSliceCount) are warnings: the scheduler skips them, which is
legitimate while a driver is still publishing. Objects that kube-apiserver
accepts but that break a rule of the DRA KEPs or API reference get
  warning: <file>#<doc> <Kind>/<name>: <field path>: <message>
lines; warnings never change the exit code.

With --live, validate reads every ResourceSlice, DeviceClass,
ResourceClaim and ResourceClaimTemplate of the cluster (kubectl's flags:
--kubeconfig, --context, ...) instead of files; objects are located as
"cluster <Kind>/<name>". The API server has admitted them, so what is
left to find is mostly what spans slices: invalid and incomplete pools.
A cluster that cannot be read exits 2.`,
		Example: `  dractl validate -f examples/a100-mig-mixins
  kubectl get resourceslices -o yaml | dractl validate -f -
  dractl validate --live --context prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in *input
			var err error
			switch {
			case liveFlag && len(o.filenames) > 0:
				return usageErrorf("--live: not with -f; validate reads either the cluster or files")
			case liveFlag:
				in, err = readLive(cmd.Context(), cluster)
			default:
				if err := o.requireInputs(); err != nil {
					return err
				}
				in, err = o.read()
			}
			if err != nil {
				return err
			}
			if !runValidate(in, o.Out) {
				return invalid()
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&liveFlag, "live", false, "validate the DRA objects of the cluster instead of files")
	cluster = addClusterFlags(cmd)
	return cmd
}

// readLive reads the cluster's DRA objects as validate's input.
func readLive(ctx context.Context, cluster *clusterOptions) (*input, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := cluster.client()
	if err != nil {
		return nil, err
	}
	objs, err := c.Read(ctx, live.KindSlices|live.KindClasses|live.KindClaims|live.KindTemplates)
	if err != nil {
		return nil, clusterError(err)
	}
	in := &input{}
	add := func(kind string, meta metav1.Object, obj any) {
		in.objects = append(in.objects, decode.Object{
			Source: decode.Source{File: "cluster", Item: -1},
			Kind:   kind, Name: meta.GetName(), Namespace: meta.GetNamespace(), Obj: obj,
		})
	}
	for _, s := range objs.Slices {
		add(api.KindSlice, s, api.FromV1(s))
	}
	for _, c := range objs.Classes {
		add("DeviceClass", c, c)
	}
	for _, c := range objs.Claims {
		add("ResourceClaim", c, c)
	}
	for _, t := range objs.Templates {
		add("ResourceClaimTemplate", t, t)
	}
	return in, nil
}

// runValidate prints every problem of the input and a summary, and reports
// whether the input is valid.
func runValidate(in *input, w io.Writer) bool {
	var (
		errCount   int
		badObjects = make(map[string]bool)
		reported   = make(map[*api.ResourceSlice]map[string]bool)
		slices     []*api.ResourceSlice
		sourceOf   = make(map[*api.ResourceSlice]*decode.Object)
	)
	// A document that did not decode is still an object the user wrote;
	// count it once however many errors it has.
	undecoded := make(map[string]bool)
	for _, e := range in.decodeErrors {
		fmt.Fprintln(w, oneLine(e.line))
		errCount++
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
			fmt.Fprintf(w, "%s: %s\n", where(obj), oneLine(e.Error()))
		}
		for _, wn := range objectWarnings(obj) {
			fmt.Fprintf(w, "warning: %s: %s\n", where(obj), oneLine(wn.String()))
		}
		if len(errs) > 0 {
			errCount += len(errs)
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
	badPools := 0
	for _, p := range pools {
		if !p.Complete() {
			fmt.Fprintf(w, "warning: pool %s: %s\n", p.ID, completeness(p))
		}
		perr := p.Validate()
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
			loc := ""
			switch {
			case len(locs) == 1:
				loc = " (" + locs[0] + ")"
				badObjects[where(sourceOf[cands[0].ResourceSlice])] = true
			case len(locs) > 1:
				// Problems name their slice only; with several slices of
				// that name there is no telling which one is meant.
				loc = " (one of " + strings.Join(locs, ", ") + ")"
				badObjects["pool "+p.ID.String()+" ResourceSlice "+prob.Slice] = true
			}
			fmt.Fprintf(w, "pool %s: ResourceSlice %s%s: %s\n", p.ID, prob.Slice, loc, oneLine(prob.Err.Error()))
			n++
		}
		if n > 0 {
			errCount += n
			badPools++
		}
	}

	fmt.Fprintln(w, summary(len(in.objects)+len(undecoded), len(pools), errCount, len(badObjects), badPools))
	return errCount == 0
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
		len(p.Slices), p.Generation, p.SliceCount)
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
