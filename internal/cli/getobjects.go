package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/admit"
	"github.com/dractl/dractl/pkg/ops/live"
)

// What get claims and get devices share: where the objects come from
// (the cluster, or -f files such as a `dractl snapshot` directory), the
// namespace and label flags as kubectl has them, the output formats, and
// -w, which prints a row again whenever what it shows changes.

// now is the clock of the AGE column; tests fix it.
var now = time.Now

// objectsOptions are the flags of get claims and get devices.
type objectsOptions struct {
	*inputOptions
	cluster       *clusterOptions
	output        string
	allNamespaces bool
	selector      string
	watch         bool
}

func (o *objectsOptions) addFlags(cmd *cobra.Command, namespaced bool) {
	// The cluster's -n first: addInputFlags would give the verb a -n of
	// its own otherwise.
	o.cluster = addClusterFlags(cmd, live.DefaultTimeout)
	if namespaced {
		cmd.Annotations = map[string]string{namespaceFilters: "claims"}
	}
	o.addInputFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "output format: wide, json or yaml (default: a table)")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the list, print a row again whenever it changes, until interrupted (a cluster only)")
	if namespaced {
		f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the claims of every namespace")
		f.StringVarP(&o.selector, "selector", "l", "", "label selector of the claims (=, ==, !=, in, notin, exists), as kubectl's")
	}
}

// check checks the flags; it returns the label selector.
func (o *objectsOptions) check() (labels.Selector, error) {
	switch o.output {
	case "", "wide", "json", "yaml":
	default:
		return nil, usageErrorf("--output: expected wide, json or yaml, found %q", o.output)
	}
	if o.watch && len(o.filenames) > 0 {
		return nil, usageErrorf("--watch reads a cluster; files do not change")
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return nil, usageErrorf("--selector: %v", err)
	}
	return sel, nil
}

// objects is what a get verb shows: claims, the slices and pods that say
// where their devices are and who uses them, and a snapshot of all of it.
type objects struct {
	claims []*resourcev1.ResourceClaim
	pods   []*corev1.Pod
	// podsKnown: pods were read, so a claim no pod uses is really unused
	// and a running pod really ran (from a snapshot only pending pods are).
	podsKnown bool
	snap      *state.Snapshot
	// warnings are what could not be read without making the answer
	// wrong (printed to stderr).
	warnings []string
}

// load reads what a verb shows: the -f inputs (with their slices when
// slicesToo), or the cluster through readLive. The client is nil with -f;
// a watch follows the cluster through it.
func (o *objectsOptions) load(ctx context.Context, slicesToo bool, readLive func(context.Context, *live.Client) (*objects, error)) (*objects, *live.Client, error) {
	if len(o.filenames) > 0 {
		x, err := o.readFiles(slicesToo)
		return x, nil, err
	}
	c, err := o.cluster.client()
	if err != nil {
		return nil, nil, err
	}
	x, err := readLive(ctx, c)
	return x, c, err
}

// readFiles reads -f inputs as the offline verbs do: a problem of the
// input is an error of the command, with every problem printed.
func (o *objectsOptions) readFiles(slicesToo bool) (*objects, error) {
	in, err := o.read()
	if err != nil {
		return nil, err
	}
	var problems []admit.Problem
	for _, p := range admit.Review(in.objects, in.decodeErrors).Problems {
		if p.Severity == "error" && p.Pool == "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		printProblems(o.Err, problems)
		return nil, &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("%s in the input", plural(len(problems), "error"))}
	}
	set := decode.Group(in.objects)
	st := state.New(state.Options{})
	for _, r := range set.TaintRules {
		if err := st.SetTaintRule(r); err != nil {
			return nil, &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("DeviceTaintRule/%s: %v", r.Name, err)}
		}
	}
	if slicesToo {
		for _, s := range set.Slices {
			if err := st.SetMixinSlice(s); err != nil {
				return nil, &exitError{code: ExitCannotAnswer, msg: err.Error()}
			}
		}
	}
	out := &objects{claims: set.Claims, pods: set.Pods}
	// A snapshot holds pending pods only: which pods run is not known.
	for _, p := range set.Pods {
		if p.Spec.NodeName != "" {
			out.podsKnown = true
		}
	}
	return out, out.state(st)
}

// state adds the claims to a State of the slices and takes the snapshot.
func (x *objects) state(st *state.State) error {
	for _, c := range x.claims {
		if err := st.SetClaim(c); err != nil {
			return &exitError{code: ExitCannotAnswer, msg: fmt.Sprintf("ResourceClaim %s/%s: %v", c.Namespace, c.Name, err)}
		}
	}
	x.snap = st.Snapshot()
	return nil
}

// forbidden says a list was refused, naming the status (403) and what the
// user lacks, so that a namespace the user may not read is never taken
// for an empty one.
func forbidden(err error, resource, namespace string) error {
	if !apierrors.IsForbidden(err) {
		return clusterError(err)
	}
	where := "at cluster scope"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	return &exitError{code: ExitUsage, msg: fmt.Sprintf("%v\n(403 Forbidden: listing %s %s needs the list verb there; nothing is shown rather than an empty table)", err, resource, where)}
}

// listPods lists the pods of a namespace ("" for all) in pages.
func listPods(ctx context.Context, c *live.Client, namespace string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return c.Clientset().CoreV1().Pods(namespace).List(ctx, o)
	}))
	p.PageSize = c.PageSize
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if pod, ok := obj.(*corev1.Pod); ok {
			out = append(out, pod)
		}
		return nil
	})
	if err != nil {
		return nil, &live.Error{Verb: "list", Resource: live.Pods, Err: err}
	}
	return out, nil
}

// readPods lists pods for the PODS, STATE and HEALTH columns; a refusal
// leaves them unknown, with a warning, rather than failing what the claims
// alone can answer.
func (x *objects) readPods(ctx context.Context, c *live.Client, namespace string) {
	pods, err := listPods(ctx, c, namespace)
	if err != nil {
		x.warnings = append(x.warnings, fmt.Sprintf("%v; who uses the claims and whether they are prepared is not known", err))
		return
	}
	x.pods, x.podsKnown = pods, true
}

func (x *objects) printWarnings(w io.Writer) {
	for _, m := range x.warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}

// age is how kubectl writes an object's age.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return humanDuration(now().Sub(t.Time))
}

// humanDuration is kubectl's short duration (2d3h, 5m10s, 45s).
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s % 3600) / 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*24*3600:
		if h := (s % (24 * 3600)) / 3600; h != 0 {
			return fmt.Sprintf("%dd%dh", s/(24*3600), h)
		}
		return fmt.Sprintf("%dd", s/(24*3600))
	case s < 2*365*24*3600:
		return fmt.Sprintf("%dd", s/(24*3600))
	}
	return fmt.Sprintf("%dy", s/(365*24*3600))
}

// shorten lists the first two of many, and how many more, unless wide.
func shorten(items []string, wide bool) string {
	switch {
	case len(items) == 0:
		return "-"
	case wide || len(items) <= 2:
		return strings.Join(items, ",")
	}
	return fmt.Sprintf("%s,+%d", strings.Join(items[:2], ","), len(items)-2)
}

// writeList writes rows as a JSON or YAML object {key: rows}.
func writeList[R any](w io.Writer, key string, rows []R, output string) error {
	if rows == nil {
		rows = []R{}
	}
	b, err := yaml.Marshal(map[string]any{key: rows})
	if err != nil {
		return err
	}
	if output == "json" {
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// showRows prints the list as -o asks: JSON or YAML {key: rows}, or the
// table (none when there are no rows).
func showRows[R any](o *objectsOptions, key string, rows []R, none string, table func([]R, bool) error) error {
	var err error
	switch {
	case o.output == "json" || o.output == "yaml":
		err = writeList(o.Out, key, rows, o.output)
	case len(rows) == 0:
		_, err = fmt.Fprintln(o.Out, none)
	default:
		err = table(rows, true)
	}
	if err != nil {
		return writeError(err)
	}
	return nil
}

// watchPrinter prints a watch's changed rows as -o asks: table rows
// without the header, or an object each.
func watchPrinter[R any](o *objectsOptions, table func([]R, bool) error) func([]R) error {
	return func(rows []R) error {
		if o.output != "json" && o.output != "yaml" {
			return table(rows, false)
		}
		for _, r := range rows {
			if err := writeRow(o.Out, r, o.output); err != nil {
				return err
			}
		}
		return nil
	}
}

// writeRow writes one row of a watch in JSON (a line) or YAML (a
// document).
func writeRow(w io.Writer, row any, output string) error {
	if output == "json" {
		b, err := json.Marshal(row)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	b, err := yaml.Marshal(row)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", b)
	return err
}

// watchSource is what a watch follows: informers of the kinds a verb
// shows, and how to turn their caches into objects. The informers are
// made one by one, not by client-go's SharedInformerFactory, whose
// ForResource would link an informer of every API group into dractl.
type watchSource struct {
	claims, pods, slices cache.SharedIndexInformer
	synced               []cache.InformerSynced
	changed              chan struct{}
}

// newWatchSource makes informers of claims (in namespace, "" for all),
// and of pods and slices when asked, which poke changed on every event.
func newWatchSource(c *live.Client, namespace string, pods, slices bool) (*watchSource, error) {
	w := &watchSource{changed: make(chan struct{}, 1)}
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	}
	add := func(inf cache.SharedIndexInformer) (cache.SharedIndexInformer, error) {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, err
		}
		w.synced = append(w.synced, inf.HasSynced)
		return inf, nil
	}
	var err error
	if w.claims, err = add(resourceinformers.NewResourceClaimInformer(c.Clientset(), namespace, 0, cache.Indexers{})); err != nil {
		return nil, err
	}
	if pods {
		if w.pods, err = add(coreinformers.NewPodInformer(c.Clientset(), namespace, 0, cache.Indexers{})); err != nil {
			return nil, err
		}
	}
	if slices {
		if w.slices, err = add(resourceinformers.NewResourceSliceInformer(c.Clientset(), 0, cache.Indexers{})); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *watchSource) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// run runs the informers until ctx ends; the returned wait returns once
// they have stopped.
func (w *watchSource) run(ctx context.Context) (wait func()) {
	var running sync.WaitGroup
	for _, inf := range []cache.SharedIndexInformer{w.claims, w.pods, w.slices} {
		if inf != nil {
			running.Go(func() { inf.RunWithContext(ctx) })
		}
	}
	return running.Wait
}

// cached is what an informer's cache holds of one kind.
func cached[T any](inf cache.SharedIndexInformer) []T {
	var out []T
	for _, obj := range inf.GetStore().List() {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// current reads the informers' caches.
func (w *watchSource) current() (*objects, error) {
	x := &objects{podsKnown: w.pods != nil}
	x.claims = cached[*resourcev1.ResourceClaim](w.claims)
	if w.pods != nil {
		x.pods = cached[*corev1.Pod](w.pods)
	}
	st := state.New(state.Options{})
	if w.slices != nil {
		for _, s := range cached[*resourcev1.ResourceSlice](w.slices) {
			if err := st.SetSlice(s); err != nil {
				x.warnings = append(x.warnings, err.Error())
			}
		}
	}
	// A claim the API holds is shown even if it conflicts with another
	// (two schedulers allocated one device): the State refuses it, and
	// the row still says what the claim says.
	for _, c := range x.claims {
		if err := st.SetClaim(c); err != nil {
			x.warnings = append(x.warnings, fmt.Sprintf("ResourceClaim %s/%s: %v", c.Namespace, c.Name, err))
		}
	}
	x.snap = st.Snapshot()
	return x, nil
}

// keyed is a row with the key a watch tells rows apart by.
type keyed interface{ key() string }

// watch prints again, after the list, every row that changed (a removed
// one with its state "deleted"), from events of the kinds the verb shows,
// until ctx ends. Bursts of events are taken together.
func watch[R keyed](ctx context.Context, src *watchSource, printed []R, rowsOf func(*objects) []R,
	removed func(R) R, print func([]R) error) error {
	last := map[string]string{}
	lastRow := map[string]R{}
	render := func(r R) string { b, _ := json.Marshal(r); return string(b) }
	for _, r := range printed {
		last[r.key()], lastRow[r.key()] = render(r), r
	}
	ctx, cancel := context.WithCancel(ctx)
	defer src.run(ctx)()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), src.synced...) {
		return nil // interrupted
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-src.changed:
		}
		// A burst of events is one change.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		x, err := src.current()
		if err != nil {
			return err
		}
		var changed []R
		seen := map[string]bool{}
		for _, r := range rowsOf(x) {
			k := r.key()
			seen[k] = true
			if s := render(r); last[k] != s {
				changed = append(changed, r)
				last[k], lastRow[k] = s, r
			}
		}
		var gone []string
		for k := range lastRow {
			if !seen[k] {
				gone = append(gone, k)
			}
		}
		slices.Sort(gone)
		for _, k := range gone {
			changed = append(changed, removed(lastRow[k]))
			delete(last, k)
			delete(lastRow, k)
		}
		if len(changed) == 0 {
			continue
		}
		if err := print(changed); err != nil {
			return writeError(err)
		}
	}
}
