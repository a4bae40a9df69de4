package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/validation"
)

type flattenOptions struct {
	*globalOptions
	output string
	strict bool
}

func newFlattenCommand(g *globalOptions) *cobra.Command {
	o := &flattenOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "flatten -f FILE|DIR|- ...",
		Short: "Resolve mixins and print plain resource.k8s.io/v1 ResourceSlices",
		Long: `flatten applies every include of every ResourceSlice (KEP-5234) and prints
the slices as resource.k8s.io/v1 objects that a kube-apiserver without the
DRAResourceSliceMixins feature accepts. Objects of other kinds (DeviceClasses,
ResourceClaims, Namespaces, Deployments, ...) are printed as written, with
nothing added, so a whole manifest directory can be piped into kubectl apply.

Every object is first checked by admission (as validate does); objects with
errors are reported on stderr and left out, so that nothing invalid is
rewritten.

The flattened slices are checked against resource.k8s.io/v1 admission; a
flattened slice can break a v1 limit its mixin form respects (more than 64
devices with counters, 8 counter sets, 32 counters per set, 2 consumptions
per device). Each such problem is a warning on stderr; with --strict the
command exits 1 after printing.

Documents that do not decode and objects that admission rejects are
reported on stderr and left out of the output; the exit code is then 1.`,
		Example: `  dractl flatten -f examples/a100-mig-mixins
  dractl flatten -f examples/a100-mig-mixins/resourceslices.yaml -o json | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.requireInputs(); err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			return o.run()
		},
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().BoolVar(&o.strict, "strict", false, "exit 1 when a flattened slice is not valid resource.k8s.io/v1")
	return cmd
}

func (o *flattenOptions) run() error {
	in, err := o.read()
	if err != nil {
		return err
	}
	warned := false
	severity := "warning"
	if o.strict {
		severity = "error"
	}
	out, failed := in.rewriteSlices(o.Err, func(obj *decode.Object, s *api.ResourceSlice, _ []*api.ResourceSlice) ([]any, error) {
		v1, err := api.ToV1(s)
		if err != nil {
			return nil, err
		}
		// Validated in dractl's model rather than as v1 because that is
		// what pkg/validation takes; without mixins the two are the same
		// object, and FromV1 is a plain copy.
		for _, e := range validation.ResourceSlice(api.FromV1(v1)) {
			fmt.Fprintf(o.Err, "%s: %s: flattened: %s\n", severity, where(obj), oneLine(e.Error()))
			warned = true
		}
		return []any{v1}, nil
	})
	if err := decode.Encode(o.Out, out, o.output); err != nil {
		return writeError(err)
	}
	if failed || (warned && o.strict) {
		return invalid()
	}
	return nil
}
