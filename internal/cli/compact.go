package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/reshape"
	"github.com/dractl/dractl/pkg/ops/admit"
	"github.com/dractl/dractl/pkg/ops/manifest"
)

type compactOptions struct {
	*inputOptions
	output string
	opts   reshape.Options
	repack bool
}

func newCompactCommand(g *inputOptions) *cobra.Command {
	o := &compactOptions{inputOptions: g}
	cmd := &cobra.Command{
		Use:   "compact -f FILE|DIR|- ...",
		Short: "Rewrite ResourceSlices into mixin form and report the bytes saved",
		Long: `compact rewrites each ResourceSlice so that attributes, capacities and
counters repeated across devices and counter sets are stated once in
spec.mixins and included by name (KEP-5234). Flattening the result gives back
the same devices and counter sets. Objects of other kinds are printed as
written.

The compacted objects go to stdout; the size of each slice before and after
(its compact JSON encoding), and the total, go to stderr. A slice whose
rewrite would not be smaller than the input (a hand-tuned mixin form can be)
is printed unchanged.

With --repack, the slices of each complete pool may also exchange devices
and counter sets: the pool is cut into as few slices as the KEP-5234 limits
allow (128 devices or 32 counter sets per slice) when that is smaller, so
each mixin is defined in fewer slices. The slices keep the input's names,
in order; names no longer needed are dropped and resourceSliceCount is
updated. Publish such a pool as a whole.

Every object is first checked by admission (as validate does). Documents
that do not decode and objects that admission rejects are reported on
stderr and left out of the output; the exit code is then 1.`,
		Example: `  dractl compact -f examples/a100-mig-flat
  dractl compact -f examples/a100-mig-flat/resourceslices.yaml | dractl flatten -f -
  dractl compact --repack -f examples/dgx-h100-mixins/resourceslices.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.requireInputs(); err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			if err := o.checkLimits(); err != nil {
				return err
			}
			return o.run()
		},
	}
	addOutputFlag(cmd, &o.output)
	addKubeVersionFlag(cmd, &o.kubeVersion)
	f := cmd.Flags()
	f.IntVar(&o.opts.MaxDeviceMixins, "max-device-mixins", 0, fmt.Sprintf("at most this many device mixins per slice (0: the KEP-5234 limit, %d)", reshape.MaxDeviceMixins))
	f.IntVar(&o.opts.MaxConsumptionMixins, "max-consumption-mixins", 0, fmt.Sprintf("at most this many device counter consumption mixins per slice (0: %d)", reshape.MaxConsumptionMixins))
	f.IntVar(&o.opts.MaxCounterSetMixins, "max-counter-set-mixins", 0, fmt.Sprintf("at most this many counter set mixins per slice (0: %d)", reshape.MaxCounterSetMixins))
	f.IntVar(&o.opts.MaxDeviceIncludes, "max-device-includes", 0, fmt.Sprintf("at most this many includes per device (0: %d)", reshape.MaxDeviceIncludes))
	f.IntVar(&o.opts.MaxConsumptionIncludes, "max-consumption-includes", 0, fmt.Sprintf("at most this many includes per counter consumption (0: %d)", reshape.MaxConsumptionIncludes))
	f.IntVar(&o.opts.MaxCounterSetIncludes, "max-counter-set-includes", 0, fmt.Sprintf("at most this many includes per counter set (0: %d)", reshape.MaxCounterSetIncludes))
	f.BoolVar(&o.repack, "repack", false, "let the slices of a complete pool exchange devices and counter sets, using fewer slices where that is smaller")
	f.BoolVar(&o.opts.SkipDevices, "skip-devices", false, "leave device attributes and capacities flat")
	f.BoolVar(&o.opts.SkipConsumptions, "skip-consumptions", false, "leave device counter consumptions flat")
	f.BoolVar(&o.opts.SkipCounterSets, "skip-counter-sets", false, "leave shared counter sets flat")
	return cmd
}

// checkLimits rejects negative limits, which compact would otherwise read
// as "no limit".
func (o *compactOptions) checkLimits() error {
	for name, v := range map[string]int{
		"max-device-mixins": o.opts.MaxDeviceMixins, "max-consumption-mixins": o.opts.MaxConsumptionMixins,
		"max-counter-set-mixins": o.opts.MaxCounterSetMixins, "max-device-includes": o.opts.MaxDeviceIncludes,
		"max-consumption-includes": o.opts.MaxConsumptionIncludes, "max-counter-set-includes": o.opts.MaxCounterSetIncludes,
	} {
		if v < 0 {
			return usageErrorf("--%s: expected 0 or more, found %d", name, v)
		}
	}
	return nil
}

func (o *compactOptions) run() error {
	target, err := o.targetVersion()
	if err != nil {
		return err
	}
	v := judgedAs(target)
	o.opts.KubeVersion = &v
	in, err := o.read()
	if err != nil {
		return err
	}
	var (
		n             int
		before, after int
		done          = map[string]bool{} // pools repacked
	)
	out, failed := in.rewriteSlices(o.Err, v, func(obj *decode.Object, s *api.ResourceSlice, admitted []*api.ResourceSlice) ([]any, error) {
		if o.repack {
			key := poolKey(s)
			if done[key] {
				return nil, nil
			}
			done[key] = true
			pool := poolOf(admitted, key)
			c, st, err := reshape.CompactPool(pool, o.opts)
			if err != nil {
				return nil, err
			}
			n += len(pool)
			before += st.BytesBefore
			after += st.BytesAfter
			fmt.Fprintf(o.Err, "pool %s/%s: %s in %s, %s, mixins: %d device, %d consumption, %d counter set\n",
				s.Spec.Driver, s.Spec.Pool.Name, plural(len(pool), "slice"), plural(len(c), "slice"),
				savings(st.BytesBefore, st.BytesAfter), st.DeviceMixins, st.ConsumptionMixins, st.CounterSetMixins)
			out := make([]any, len(c))
			for i, s := range c {
				out[i] = s
			}
			return out, nil
		}
		c, st, err := reshape.Compact(s, o.opts)
		if err != nil {
			return nil, err
		}
		n++
		before += st.BytesBefore
		if st.BytesAfter >= st.BytesBefore {
			// A hand-written mixin form can beat compact's; a command named
			// compact must never make a slice larger, so keep the input,
			// which means the same (compact flattens it first anyway).
			after += st.BytesBefore
			fmt.Fprintf(o.Err, "%s: %s, kept as is (compacted: %s bytes)\n",
				admit.Where(obj), savings(st.BytesBefore, st.BytesBefore), thousands(st.BytesAfter))
			return []any{s}, nil
		}
		after += st.BytesAfter
		fmt.Fprintf(o.Err, "%s: %s, mixins: %d device, %d consumption, %d counter set\n",
			admit.Where(obj), savings(st.BytesBefore, st.BytesAfter), st.DeviceMixins, st.ConsumptionMixins, st.CounterSetMixins)
		return []any{c}, nil
	})
	if err := manifest.Write(o.Out, out, o.output); err != nil {
		return writeError(err)
	}
	fmt.Fprintf(o.Err, "compacted %s: %s\n", plural(n, "slice"), savings(before, after))
	if failed {
		return invalid()
	}
	return nil
}

// savings formats "412,338 → 98,102 bytes (-76.2%)".
func savings(before, after int) string {
	pct := 0.0
	if before > 0 {
		pct = 100 * float64(after-before) / float64(before)
	}
	return fmt.Sprintf("%s → %s bytes (%+.1f%%)", thousands(before), thousands(after), pct)
}

// thousands groups digits by three, which makes byte counts readable at a
// glance.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, c)
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

func poolKey(s *api.ResourceSlice) string { return s.Spec.Driver + "/" + s.Spec.Pool.Name }

// poolOf returns the slices of the pool key in input order.
func poolOf(slices []*api.ResourceSlice, key string) []*api.ResourceSlice {
	var out []*api.ResourceSlice
	for _, s := range slices {
		if poolKey(s) == key {
			out = append(out, s)
		}
	}
	return out
}
