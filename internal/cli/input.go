package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dractl/dractl/pkg/admit"
	"github.com/dractl/dractl/pkg/api"
	"github.com/dractl/dractl/pkg/decode"
	"github.com/dractl/dractl/pkg/validation"
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

// addInputFlags registers the flags of the verbs that read manifests.
func (o *inputOptions) addInputFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVarP(&o.filenames, "filename", "f", nil,
		"file, directory or - (stdin) to read objects from; repeatable")
	f.BoolVarP(&o.recursive, "recursive", "R", false,
		"read the directories given with -f and all directories below them")
	f.StringVar(&o.maxObjectBytes, "max-object-size", "3Mi",
		"largest object read, as a quantity (3Mi is kube-apiserver's request limit); larger ones are errors")
}

// decodeOptions turns the input flags into decode options.
func (o *inputOptions) decodeOptions() (decode.Options, error) {
	q, err := resource.ParseQuantity(o.maxObjectBytes)
	if err != nil || q.Sign() <= 0 || !q.IsZero() && q.Value() > math.MaxInt32 {
		return decode.Options{}, usageErrorf("--max-object-size: expected a positive size such as 3Mi or 10Mi, found %q", o.maxObjectBytes)
	}
	return decode.Options{MaxObjectBytes: int(q.Value())}, nil
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
	paths := o.filenames
	if o.recursive {
		var err error
		if paths, err = expandRecursive(paths); err != nil {
			return nil, err
		}
	}
	objs, err := opts.Paths(paths, o.In)
	in := &input{objects: objs}
	if err == nil {
		return in, nil
	}
	var errs decode.Errors
	if !errors.As(err, &errs) {
		return nil, usageErrorf("%v", err)
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

// expandRecursive replaces each directory by itself and every directory
// below it that holds manifests, in lexical order like kubectl -R. A
// directory without manifests anywhere below it is kept, so that decode
// reports it rather than -R silently checking nothing.
func expandRecursive(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "-" {
			out = append(out, p)
			continue
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			out = append(out, p)
			continue
		}
		var dirs []string
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if isManifest(d.Name()) {
				dir := filepath.Dir(path)
				if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
					dirs = append(dirs, dir)
				}
			}
			return nil
		})
		if err != nil {
			return nil, usageErrorf("cannot read %s: %v", p, unwrapPathError(err))
		}
		if len(dirs) == 0 {
			dirs = []string{p}
		}
		out = append(out, dirs...)
	}
	return out, nil
}

// isManifest mirrors the rule decode applies to directory entries (which it
// does not export): the extensions it reads.
func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
