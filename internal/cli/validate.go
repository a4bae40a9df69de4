package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/ops/admit"
	"github.com/dractl/dractl/pkg/ops/live"
)

func newValidateCommand(o *inputOptions) *cobra.Command {
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

Objects are judged as a kube-apiserver of the minor --kube-version names
(1.37 stores an attribute named example.net/pci/root, 1.38 refuses it).
Without it they are judged as the newest supported minor does, and where
the supported minors disagree each error says which refuse it and a last
line gives each minor's verdict.

-o json prints one ValidationReport object instead, for CI pipelines; its
schema is in docs/output.md. -o yaml prints the same object as YAML.

With --live, validate reads every ResourceSlice, DeviceClass,
ResourceClaim and ResourceClaimTemplate of the cluster (kubectl's flags:
--kubeconfig, --context, ...) instead of files; objects are located as
"cluster <Kind>/<name>" and judged as the cluster's kube-apiserver minor.
The API server has admitted them, so what is
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
			if liveFlag && o.kubeVersion != "" {
				return usageErrorf("--kube-version: not with --live; the cluster's kube-apiserver judges by its own version")
			}
			if !liveFlag {
				if err := o.requireInputs(); err != nil {
					return err
				}
			}
			if output != "" && output != "json" && output != "yaml" {
				return usageErrorf("--output: expected json or yaml, found %q", output)
			}
			target, err := o.targetVersion()
			if err != nil {
				return err
			}
			var in *input
			if liveFlag {
				in, err = readLive(cmd.Context(), cluster)
			} else {
				in, err = o.read()
			}
			if err != nil {
				return err
			}
			if liveFlag {
				target = in.kubeVersion
				if in.note != "" {
					fmt.Fprintln(o.Err, in.note)
				}
			}
			r := admit.ReviewFor(target, in.objects, in.decodeErrors)
			if output != "" {
				if err := writeReportAs(o.Out, r, output); err != nil {
					return writeError(err)
				}
			} else {
				writeReport(o.Out, r)
			}
			if !r.Valid {
				return invalid()
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: one line per problem and a summary)")
	cmd.Flags().BoolVar(&liveFlag, "live", false, "validate the DRA objects of the cluster instead of files")
	addKubeVersionFlag(cmd, &o.kubeVersion)
	cluster = addClusterFlags(cmd, live.DefaultTimeout)
	return cmd
}

// writeReport prints a report as text: a line per problem and a summary.
func writeReport(w io.Writer, r *admit.Report) {
	for _, p := range r.Problems {
		fmt.Fprintln(w, p.Text)
	}
	fmt.Fprintln(w, summary(r.Summary.Objects, r.Summary.Pools, r.Summary.Errors, r.Summary.InvalidObjects, r.Summary.InvalidPools))
	if len(r.Verdicts) > 0 {
		parts := make([]string, len(r.Verdicts))
		for i, v := range r.Verdicts {
			parts[i] = v.KubeVersion + ": valid"
			if !v.Valid {
				parts[i] = fmt.Sprintf("%s: %s", v.KubeVersion, plural(v.Errors, "error"))
			}
		}
		fmt.Fprintf(w, "the kube-apiserver minors disagree: %s\n", strings.Join(parts, "; "))
	}
}

// writeReportAs writes a report object as JSON or as YAML, the same
// fields under the same names.
func writeReportAs(w io.Writer, v any, output string) error {
	if output != "yaml" {
		return writeJSON(w, v)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote CEL, which has < and >
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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
