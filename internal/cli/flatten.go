package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/reshape"
	"github.com/dractl/dractl/pkg/ops/admit"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

type flattenOptions struct {
	*inputOptions
	output string
	strict bool
}

func newFlattenCommand(g *inputOptions) *cobra.Command {
	o := &flattenOptions{inputOptions: g}
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

A flattened slice can break a v1 per-slice limit its mixin form respects,
so it is split as a driver publishing it splits it: counter sets apart from
devices, at most 8 counter sets and at most 64 devices with counters (128
without) per slice. The pieces are named <name>-0, <name>-1, ... and every
slice of the pool declares the pool's new resourceSliceCount, so flatten
the slices of a pool together. What no split can fix (a device with more
than 2 counter consumptions, a counter set with more than 32 counters) is
checked against resource.k8s.io/v1 admission and reported as a warning on
stderr; with --strict the command exits 1 after printing.

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
	addKubeVersionFlag(cmd, &o.kubeVersion)
	cmd.Flags().BoolVar(&o.strict, "strict", false, "exit 1 when a flattened slice is not valid resource.k8s.io/v1")
	return cmd
}

func (o *flattenOptions) run() error {
	target, err := o.targetVersion()
	if err != nil {
		return err
	}
	v := judgedAs(target)
	in, err := o.read()
	if err != nil {
		return err
	}
	warned := false
	severity := "warning"
	if o.strict {
		severity = "error"
	}
	// The pool's resourceSliceCount counts the pieces of all its slices,
	// so every admitted slice is split before the first is printed.
	var counts map[reshape.PoolKey]int64
	out, failed := in.rewriteSlices(o.Err, v, func(obj *decode.Object, s *api.ResourceSlice, admitted []*api.ResourceSlice) ([]any, error) {
		if counts == nil {
			pieces := make([][]*api.ResourceSlice, len(admitted))
			for i, a := range admitted {
				// An include that names no mixin fails admission, so
				// admitted slices flatten.
				pieces[i], _ = reshape.ForV1(a)
			}
			counts = reshape.Count(admitted, pieces)
		}
		pieces, err := reshape.ForV1(s)
		if err != nil {
			return nil, err
		}
		objs := make([]any, 0, len(pieces))
		for _, p := range pieces {
			p.Spec.Pool.ResourceSliceCount = counts[reshape.KeyOf(s)]
			// Validated in dractl's model because that is what
			// pkg/core/validation takes; without mixins the two are the same
			// object.
			for _, e := range v.ResourceSlice(p) {
				fmt.Fprintf(o.Err, "%s: %s: flattened %s: %s\n", severity, admit.Where(obj), p.Name, admit.OneLine(e.Error()))
				warned = true
			}
			v1, err := api.ToUpstream(p)
			if err != nil {
				return nil, err
			}
			objs = append(objs, v1)
		}
		return objs, nil
	})
	if err := manifest.Write(o.Out, out, o.output); err != nil {
		return writeError(err)
	}
	if failed || (warned && o.strict) {
		return invalid()
	}
	return nil
}
