package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/ops/admit"
)

// input is everything read from the -f arguments: the objects that decoded
// and, separately, the documents that did not.
type input struct {
	objects      []decode.Object
	decodeErrors []*decode.Error
	// kubeVersion is a live cluster's kube-apiserver minor, when dractl
	// validates for it.
	kubeVersion *validation.KubeVersion
	// note says how a live cluster's objects are judged when not by its
	// own minor's rules.
	note string
}

// namespaceNamesObject annotates a verb whose -n, with arguments, names
// the namespace of the object they name (explain pod/NAME), files or not.
const namespaceNamesObject = "dractl.dev/namespace-names-object"

// namespaceFilters annotates a verb whose -n, with -f, only selects which
// of the objects read it lists (get claims): the others still count for
// everything it shows, so the filter hides nothing.
const namespaceFilters = "dractl.dev/namespace-filters"

// addInputFlags registers the flags of the verbs that read manifests, and
// refuses -n with -f for every one of them alike (see offlineNamespace).
func (o *inputOptions) addInputFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	if f.Lookup("namespace") == nil {
		// Verbs that never read a cluster have no -n; give them one that
		// only says why it does not apply, so that every verb says so alike.
		f.StringP("namespace", "n", "", "not with -f: objects read from files keep their own namespace")
		_ = f.MarkHidden("namespace")
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := o.offlineNamespace(c, args); err != nil {
			return err
		}
		return run(c, args)
	}
	f.StringArrayVarP(&o.filenames, "filename", "f", nil,
		"file, directory or - (stdin) to read objects from; repeatable")
	f.BoolVarP(&o.recursive, "recursive", "R", false,
		"read the directories given with -f and all directories below them")
	f.StringVar(&o.maxObjectBytes, "max-object-size", "3Mi",
		"largest object read, as a quantity (3Mi is kube-apiserver's request limit); larger ones are errors")
}

// offlineNamespace refuses -n with -f. An object read from a file is in
// the namespace it names, "default" where it names none, as kubectl
// create -f puts it without -n; -n as a filter would make allocate and
// explain answer as though the claims of other namespaces held no device.
// -n keeps its meaning where it names one object (explain pod/NAME -n NS),
// where it only selects what is listed (get claims) and where a verb reads
// a cluster.
func (o *inputOptions) offlineNamespace(cmd *cobra.Command, args []string) error {
	f := cmd.Flags().Lookup("namespace")
	if len(o.filenames) == 0 || f == nil || !f.Changed {
		return nil
	}
	if cmd.Annotations[namespaceNamesObject] != "" && len(args) > 0 {
		return nil
	}
	if cmd.Annotations[namespaceFilters] != "" {
		return nil
	}
	return usageErrorf("-n %s: not with -f: objects read from files keep their own namespace (\"default\" where they name none); -n names a cluster's namespace, or with explain pod/NAME the pod's", f.Value.String())
}

// decodeOptions turns the input flags into decode options.
func (o *inputOptions) decodeOptions() (decode.Options, error) {
	q, err := resource.ParseQuantity(o.maxObjectBytes)
	if err != nil || q.Sign() <= 0 || !q.IsZero() && q.Value() > math.MaxInt32 {
		return decode.Options{}, usageErrorf("--max-object-size: expected a positive size such as 3Mi or 10Mi, found %q", o.maxObjectBytes)
	}
	return decode.Options{MaxObjectBytes: int(q.Value()), Recursive: o.recursive}, nil
}

// read decodes every -f argument. Inputs that cannot be opened at all are a
// usage error (exit 2): nothing about their content is known. Everything
// that can be opened is decoded in full so that one bad document does not
// hide problems in the others.
func (o *inputOptions) read() (*input, error) {
	opts, err := o.decodeOptions()
	if err != nil {
		return nil, err
	}
	stdin := 0
	for _, name := range o.filenames {
		if name == "-" {
			if stdin++; stdin > 1 {
				return nil, usageErrorf("-f -: standard input can be read only once")
			}
			continue
		}
		if err := readable(name); err != nil {
			return nil, usageErrorf("cannot read %s: %v", name, err)
		}
	}
	objs, err := opts.Paths(o.filenames, o.In)
	in := &input{objects: objs}
	if err == nil {
		return in, nil
	}
	var errs decode.Errors
	if !errors.As(err, &errs) {
		return nil, usageErrorf("%v", err)
	}
	// A path with nothing in it was as good as unreadable: nothing about
	// it was checked, and passing would hide the failed command before a
	// pipe (kubectl get ... | dractl validate -f -).
	var empty []string
	for _, e := range errs {
		if e.Empty {
			empty = append(empty, fmt.Sprintf("-f %s: %s", e.Source.File, e.Detail))
		}
	}
	if len(empty) > 0 {
		return nil, usageErrorf("%s", strings.Join(empty, "\nerror: "))
	}
	in.decodeErrors = errs
	return in, nil
}

// readable reports why a path given with -f cannot be read; decode itself
// would report it as one more decode error, but an unreadable input is a
// different failure (the command line is wrong) with its own exit code.
func readable(name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return unwrapPathError(err)
	}
	if fi.IsDir() {
		_, err = os.ReadDir(name)
		return unwrapPathError(err)
	}
	f, err := os.Open(name)
	if err != nil {
		return unwrapPathError(err)
	}
	return f.Close()
}

// unwrapPathError drops the path from an *fs.PathError: the caller prints
// the name already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// printDecodeErrors prints every decode problem as an error line and
// reports whether there were any.
func (in *input) printDecodeErrors(w io.Writer) bool {
	for _, e := range in.decodeErrors {
		fmt.Fprintf(w, "error: %s\n", admit.OneLine(e.Error()))
	}
	return len(in.decodeErrors) > 0
}

// rewriteSlices is the loop of the verbs that rewrite slices. Documents
// that do not decode and objects that admission rejects are printed to w
// as errors and left out: their errors are what the user needs, and the
// limits admission enforces are what bound the work of rewriting (a mixin
// bomb never gets that far). Objects of other kinds pass through as
// written, not even defaulted. Each admitted slice is replaced by what
// rewrite returns for it, or left out with rewrite's error printed;
// admitted are all the admitted slices in input order. failed reports
// whether any error was printed.
func (in *input) rewriteSlices(w io.Writer, v validation.KubeVersion, rewrite func(obj *decode.Object, s *api.ResourceSlice, admitted []*api.ResourceSlice) ([]any, error)) (out []any, failed bool) {
	failed = in.printDecodeErrors(w)
	objErrs := admit.ObjectsAt(v, in.objects)
	var admitted []*api.ResourceSlice
	for i := range in.objects {
		if s, ok := in.objects[i].Obj.(*api.ResourceSlice); ok && len(objErrs[i]) == 0 {
			admitted = append(admitted, s)
		}
	}
	for i := range in.objects {
		obj := &in.objects[i]
		if len(objErrs[i]) > 0 {
			for _, e := range objErrs[i] {
				fmt.Fprintf(w, "error: %s: %s\n", admit.Where(obj), admit.OneLine(e.Error()))
			}
			failed = true
			continue
		}
		s, ok := obj.Obj.(*api.ResourceSlice)
		if !ok {
			out = append(out, obj.Raw)
			continue
		}
		objs, err := rewrite(obj, s, admitted)
		if err != nil {
			fmt.Fprintf(w, "error: %s: %s\n", admit.Where(obj), admit.OneLine(err.Error()))
			failed = true
			continue
		}
		out = append(out, objs...)
	}
	return out, failed
}
