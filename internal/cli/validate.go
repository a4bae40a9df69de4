package cli

import (
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
)

func newValidateCommand(o *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "validate -f FILE|DIR|- ...",
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
legitimate while a driver is still publishing.`,
		Example: `  dractl validate -f examples/a100-mig-mixins
  kubectl get resourceslices -o yaml | dractl validate -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.requireInputs(); err != nil {
				return err
			}
			in, err := o.read()
			if err != nil {
				return err
			}
			if !runValidate(in, o.Out) {
				return invalid()
			}
			return nil
		},
	}
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
		badObjects[e.where] = true
		undecoded[e.where] = true
	}

	for i := range in.objects {
		obj := &in.objects[i]
		errs := validateObject(obj)
		for _, e := range errs {
			fmt.Fprintf(w, "%s: %s\n", where(obj), oneLine(e.Error()))
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
			fmt.Fprintf(w, "warning: pool %s: incomplete: %d of %d slices of generation %d found; the scheduler ignores it until all are published\n",
				p.ID, len(p.Slices), p.SliceCount, p.Generation)
		}
		perr := p.Validate()
		if perr == nil {
			continue
		}
		n := 0
		for _, prob := range perr.Problems {
			s := sliceNamed(p, prob.Slice)
			if s != nil && reported[s.ResourceSlice][errorKey(prob.Err)] {
				continue
			}
			loc := ""
			if s != nil {
				if src := sourceOf[s.ResourceSlice]; src != nil {
					loc = " (" + src.Source.String() + ")"
					badObjects[where(src)] = true
				}
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

// errorKey identifies an error by where and what, not by its wording,
// because admission and pool validation phrase the same problem differently.
func errorKey(e *field.Error) string {
	return string(e.Type) + " " + e.Field
}

// sliceNamed finds the slice a pool problem is about. Problems name their
// slice only, so when several slices of the pool share the name (an input
// that is wrong anyway) there is no telling which, and nil says so.
func sliceNamed(p *pool.Pool, name string) *pool.Slice {
	var found *pool.Slice
	for _, s := range p.Slices {
		if s.Name == name {
			if found != nil {
				return nil
			}
			found = s
		}
	}
	return found
}

func summary(objects, pools, errs, badObjects, badPools int) string {
	head := fmt.Sprintf("%s, %s", plural(objects, "object"), plural(pools, "pool"))
	if errs == 0 {
		return head + ": valid"
	}
	s := fmt.Sprintf("%s: %s in %s", head, plural(errs, "error"), plural(badObjects, "object"))
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
