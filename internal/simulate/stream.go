package simulate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/decode"
	"github.com/dractl/dractl/pkg/core/podclaims"
	"github.com/dractl/dractl/pkg/core/workload"
)

// Pod is one arrival: claims that are allocated together, on one node, as
// the claims of a pod are.
type Pod struct {
	Name types.NamespacedName
	// Kind is the mix entry the pod was drawn from, or "" for a pod read
	// from a file.
	Kind   string
	Arrive time.Duration
	// Priority orders waiting pods, higher first, as the scheduling
	// queue's default sort does.
	Priority int32
	// Lifetime is how long the pod runs once placed; zero: it never leaves.
	Lifetime time.Duration
	Claims   []*resourcev1.ResourceClaim
	// shape identifies pods whose claims ask for the same thing: if one
	// does not fit on a node, neither does the other, until something on
	// that node is freed.
	shape string
}

// Stream is a workload: pods in order of arrival.
type Stream struct {
	// Name says where the stream comes from, for reports.
	Name string
	Pods []Pod
}

// StreamError is a workload that cannot be built: a template or claim that
// a pod names is missing, or a bad annotation. Each line has the
// object's source and a field path.
type StreamError struct{ Lines []string }

func (e *StreamError) Error() string {
	return fmt.Sprintf("%d problems in the workload; first: %s", len(e.Lines), e.Lines[0])
}

// NewStream builds the stream of pods a workload's objects declare:
//   - every Workload generates its pods from its mix;
//   - every Pod arrives with one claim per entry of spec.resourceClaims (a
//     template's claim, or a pending ResourceClaim named there);
//   - every pending ResourceClaim no pod names arrives as a pod of its own.
//
// Pods read from files arrive in input order, a second apart, unless
// annotated with their arrival; all pods are merged by arrival time.
func NewStream(set *decode.Set) (*Stream, error) {
	b := streamBuilder{set: set, templates: map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{}, shapes: map[string]string{}}
	for _, t := range set.ClaimTemplates {
		b.templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	s := &Stream{}
	for _, w := range set.Workloads {
		s.Pods = append(s.Pods, b.generate(w)...)
		s.Name = join(s.Name, "Workload "+w.Namespace+"/"+w.Name)
	}
	explicit := b.explicit()
	if len(explicit) > 0 {
		s.Name = join(s.Name, fmt.Sprintf("%d pods from files", len(explicit)))
	}
	s.Pods = append(s.Pods, explicit...)
	if len(b.errs) > 0 {
		return nil, &StreamError{Lines: b.errs}
	}
	slices.SortStableFunc(s.Pods, func(x, y Pod) int { return cmp.Compare(x.Arrive, y.Arrive) })
	return s, nil
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

type streamBuilder struct {
	set       *decode.Set
	templates map[types.NamespacedName]*resourcev1.ResourceClaimTemplate
	shapes    map[string]string // spec JSON → short shape id
	errs      []string
}

func (b *streamBuilder) fail(obj any, kind, name string, err *field.Error) {
	src, _ := b.set.Source(obj)
	b.errs = append(b.errs, fmt.Sprintf("%s %s/%s: %s", src, kind, name, err.Error()))
}

// shapeOf interns the claim specs of a pod.
func (b *streamBuilder) shapeOf(claims []*resourcev1.ResourceClaim) string {
	specs := make([]resourcev1.ResourceClaimSpec, len(claims))
	for i, c := range claims {
		specs[i] = c.Spec
	}
	data, _ := json.Marshal(specs)
	id, ok := b.shapes[string(data)]
	if !ok {
		id = fmt.Sprintf("s%d", len(b.shapes))
		b.shapes[string(data)] = id
	}
	return id
}

// claimFrom makes the claim the resourceclaim controller would create for
// a generated pod's template entry.
func claimFrom(t *resourcev1.ResourceClaimTemplate, pod types.NamespacedName, entry string) *resourcev1.ResourceClaim {
	return podclaims.FromTemplate(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, entry, t)
}

// generate draws a Workload's pods. Gaps between arrivals and lifetimes
// are exponential: arrivals form a Poisson process, as independent users
// submitting jobs do.
func (b *streamBuilder) generate(w *workload.Workload) []Pod {
	spec := &w.Spec
	mix := field.NewPath("spec", "mix")
	total := int64(0)
	for i, e := range spec.Mix {
		total += int64(e.Weight)
		for j, name := range e.ResourceClaimTemplates {
			if b.templates[types.NamespacedName{Namespace: w.Namespace, Name: name}] == nil {
				b.fail(w, workload.Kind, w.Name, field.NotFound(mix.Index(i).Child("resourceClaimTemplates").Index(j), name))
			}
		}
	}
	if len(b.errs) > 0 || total <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(spec.Seed), 0))
	mean := spec.MeanInterarrival.Duration
	shapes := make([]string, len(spec.Mix))
	out := make([]Pod, 0, spec.Pods)
	var t time.Duration
	for i := range int(spec.Pods) {
		t += time.Duration(r.ExpFloat64() * float64(mean))
		pick := r.Int64N(total)
		k := 0
		for pick >= int64(spec.Mix[k].Weight) {
			pick -= int64(spec.Mix[k].Weight)
			k++
		}
		e := &spec.Mix[k]
		pod := Pod{Name: types.NamespacedName{Namespace: w.Namespace, Name: fmt.Sprintf("%s-%s-%d", w.Name, e.Name, i+1)}, Kind: e.Name, Arrive: t, Priority: e.Priority}
		lifetime := spec.MeanLifetime
		if e.MeanLifetime != nil {
			lifetime = e.MeanLifetime
		}
		if lifetime != nil {
			// At least a nanosecond, so that a pod never leaves before it
			// arrived.
			pod.Lifetime = max(1, time.Duration(r.ExpFloat64()*float64(lifetime.Duration)))
		}
		for _, name := range e.ResourceClaimTemplates {
			pod.Claims = append(pod.Claims, claimFrom(b.templates[types.NamespacedName{Namespace: w.Namespace, Name: name}], pod.Name, name))
		}
		if shapes[k] == "" {
			shapes[k] = b.shapeOf(pod.Claims)
		}
		pod.shape = shapes[k]
		out = append(out, pod)
	}
	return out
}

// explicit turns the Pods and pending ResourceClaims of the input into
// arrivals, in input order.
func (b *streamBuilder) explicit() []Pod {
	claims := map[types.NamespacedName]*resourcev1.ResourceClaim{}
	for _, c := range b.set.Claims {
		if c.Status.Allocation == nil {
			claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
		}
	}
	// Only pending claims arrive: a named claim already allocated is in
	// use by whoever holds it. Template claims are made as the
	// resourceclaim controller makes them.
	// Extended resources that DeviceClasses back come from devices: the
	// simulator models DRA's devices, not device plugins, so every node
	// leaves them to DRA.
	resolver := podclaims.Resolver{
		Classes: podclaims.ClassesOf(b.set.Classes),
		Claim: func(ns, name string) (*resourcev1.ResourceClaim, error) {
			return claims[types.NamespacedName{Namespace: ns, Name: name}], nil
		},
		Templates: &podclaims.Templates{Template: func(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
			return b.templates[types.NamespacedName{Namespace: ns, Name: name}], nil
		}},
	}
	used := map[*resourcev1.ResourceClaim]bool{}
	type arrival struct {
		obj  any
		pod  Pod
		meta *metav1.ObjectMeta
		kind string
	}
	var in []arrival
	for _, p := range b.set.Pods {
		pod := Pod{Name: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, Priority: ptr.Deref(p.Spec.Priority, 0)}
		entries, _ := resolver.Resolve(p)
		for _, e := range entries {
			if e.Err != nil {
				if e.Index < 0 {
					// The extended resources, not an entry of
					// spec.resourceClaims.
					b.fail(p, "Pod", p.Name, field.Invalid(field.NewPath(e.Field), e.Name, e.Err.Error()))
					continue
				}
				ferr := &field.Error{Type: field.ErrorTypeNotFound, Field: e.Field, BadValue: claimRef(p, e.Index)}
				if !podclaims.IsNotFound(e.Err) {
					ferr.Type, ferr.Detail = field.ErrorTypeInvalid, e.Err.Error()
				}
				b.fail(p, "Pod", p.Name, ferr)
				continue
			}
			if e.Extended != nil && e.Claim == nil {
				claim, _ := e.Extended.Claim(e.Extended.Mapped(), podclaims.StableExtendedClaimName(p))
				pod.Claims = append(pod.Claims, claim)
				continue
			}
			if !e.Generated {
				used[e.Claim] = true
			}
			pod.Claims = append(pod.Claims, e.Claim)
		}
		if len(pod.Claims) > 0 {
			in = append(in, arrival{obj: p, pod: pod, meta: &p.ObjectMeta, kind: "Pod"})
		}
	}
	for _, c := range b.set.Claims {
		if c.Status.Allocation != nil || used[c] {
			continue
		}
		pod := Pod{Name: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, Claims: []*resourcev1.ResourceClaim{c}}
		in = append(in, arrival{obj: c, pod: pod, meta: &c.ObjectMeta, kind: "ResourceClaim"})
	}
	out := make([]Pod, 0, len(in))
	var t time.Duration
	annotations := field.NewPath("metadata", "annotations")
	for _, a := range in {
		t += workload.DefaultInterarrival
		if v, ok := a.meta.Annotations[workload.ArrivalAnnotation]; ok {
			d, err := workload.ParseDuration(annotations.Key(workload.ArrivalAnnotation), v)
			if err != nil {
				b.fail(a.obj, a.kind, a.meta.Name, err)
			}
			t = d
		}
		a.pod.Arrive = t
		if v, ok := a.meta.Annotations[workload.LifetimeAnnotation]; ok {
			d, err := workload.ParseDuration(annotations.Key(workload.LifetimeAnnotation), v)
			if err != nil {
				b.fail(a.obj, a.kind, a.meta.Name, err)
			}
			a.pod.Lifetime = max(d, 1)
		}
		a.pod.shape = b.shapeOf(a.pod.Claims)
		out = append(out, a.pod)
	}
	return out
}

// claimRef is the name pod.spec.resourceClaims[i] refers to.
func claimRef(p *corev1.Pod, i int) string {
	rc := p.Spec.ResourceClaims[i]
	if rc.ResourceClaimName != nil {
		return *rc.ResourceClaimName
	}
	return ptr.Deref(rc.ResourceClaimTemplateName, "")
}
