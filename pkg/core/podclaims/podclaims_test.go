package podclaims

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"
)

// world is a namespace's claims and templates, looked up the ways callers
// do: the scheduler's tracker answers NotFound errors, the files nil.
type world struct {
	claims    []*resourcev1.ResourceClaim
	templates []*resourcev1.ResourceClaimTemplate
	notFound  bool // answer a NotFound API error instead of nil, nil
}

func (w *world) claim(ns, name string) (*resourcev1.ResourceClaim, error) {
	for _, c := range w.claims {
		if c.Namespace == ns && c.Name == name {
			return c, nil
		}
	}
	if w.notFound {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
	}
	return nil, nil
}

func (w *world) template(ns, name string) (*resourcev1.ResourceClaimTemplate, error) {
	for _, t := range w.templates {
		if t.Namespace == ns && t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

func (w *world) owned(*corev1.Pod) []*resourcev1.ResourceClaim { return w.claims }

func (w *world) strict() Resolver { return Resolver{Claim: w.claim} }

func (w *world) offline() Resolver {
	return Resolver{Claim: w.claim, Templates: &Templates{Template: w.template, Owned: w.owned}}
}

const ns = "team"

func pod(entries ...corev1.PodResourceClaim) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer", UID: "pod-uid"},
		Spec:       corev1.PodSpec{ResourceClaims: entries},
	}
}

func named(entry, claim string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimName: ptr.To(claim)}
}

func templated(entry, template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To(template)}
}

func withStatus(p *corev1.Pod, entry string, name *string) *corev1.Pod {
	p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: name})
	return p
}

func claim(name string, owner *corev1.Pod, entry string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if owner != nil {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		c.Annotations = map[string]string{resourcev1.PodResourceClaimAnnotation: entry}
	}
	return c
}

func template(name string) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}, Annotations: map[string]string{"note": "x"}},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: 1},
			}}}},
		},
	}
}

// outcome is what a test expects of one entry: the claim's name ("" for
// none), whether it was made here, or its error, the field the error
// concerns and whether it says "not found".
type outcome struct {
	claim     string
	generated bool
	err       string
	field     string
	notFound  bool
}

func TestResolve(t *testing.T) {
	p := pod()
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", UID: "other-uid"}}
	deleting := claim("going", nil, "")
	deleting.DeletionTimestamp = &metav1.Time{}
	generated := FromTemplate(p, "gpu", template("one-gpu")).Name

	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		world   world
		offline bool
		want    []outcome
	}{{
		name:  "named claim",
		pod:   pod(named("gpu", "shared")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("shared", nil, "")}},
		want:  []outcome{{claim: "shared"}},
	}, {
		name:  "named claim missing, nil answer",
		pod:   pod(named("gpu", "shared")),
		want:  []outcome{{err: `resourceclaims.resource.k8s.io "shared" not found`, field: "spec.resourceClaims[0].resourceClaimName", notFound: true}},
		world: world{},
	}, {
		name:  "named claim missing, NotFound answer",
		pod:   pod(named("gpu", "shared")),
		world: world{notFound: true},
		want:  []outcome{{err: `resourceclaims.resource.k8s.io "shared" not found`, field: "spec.resourceClaims[0].resourceClaimName", notFound: true}},
	}, {
		name:    "named claim missing offline: no template to make it from",
		pod:     pod(named("gpu", "shared")),
		offline: true,
		want:    []outcome{{err: `resourceclaims.resource.k8s.io "shared" not found`, field: "spec.resourceClaims[0].resourceClaimName", notFound: true}},
	}, {
		name:  "named claim being deleted",
		pod:   pod(named("gpu", "going")),
		world: world{claims: []*resourcev1.ResourceClaim{deleting}},
		want:  []outcome{{err: `resourceclaim "going" is being deleted`, field: "spec.resourceClaims[0].resourceClaimName"}},
	}, {
		name:  "template claim recorded in the status",
		pod:   withStatus(pod(templated("gpu", "one-gpu")), "gpu", ptr.To("trainer-gpu-abcde")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("trainer-gpu-abcde", p, "gpu")}},
		want:  []outcome{{claim: "trainer-gpu-abcde"}},
	}, {
		name:  "template claim of another pod",
		pod:   withStatus(pod(templated("gpu", "one-gpu")), "gpu", ptr.To("trainer-gpu-abcde")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("trainer-gpu-abcde", other, "gpu")}},
		want:  []outcome{{err: "ResourceClaim team/trainer-gpu-abcde was not created for Pod team/trainer (Pod is not owner)", field: "spec.resourceClaims[0].resourceClaimTemplateName"}},
	}, {
		name: "the controller decided no claim is needed",
		pod:  withStatus(pod(templated("gpu", "one-gpu"), named("nic", "nic")), "gpu", nil),
		world: world{claims: []*resourcev1.ResourceClaim{claim("nic", nil, "")},
			templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		offline: true,
		want:    []outcome{{claim: "nic"}},
	}, {
		name:  "template claim not created yet: kube-scheduler waits",
		pod:   pod(templated("gpu", "one-gpu")),
		world: world{templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		want:  []outcome{{err: `pod "team/trainer": ResourceClaim not created yet`, field: "spec.resourceClaims[0]", notFound: true}},
	}, {
		name:    "template claim not created yet: made offline",
		pod:     pod(templated("gpu", "one-gpu")),
		world:   world{templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		offline: true,
		want:    []outcome{{claim: generated, generated: true}},
	}, {
		name: "template claim created but not recorded: found by owner and annotation",
		pod:  pod(templated("gpu", "one-gpu")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("x-other-entry", p, "nic"), claim("trainer-gpu-zzzzz", p, "gpu")},
			templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		offline: true,
		want:    []outcome{{claim: "trainer-gpu-zzzzz"}},
	}, {
		name: "an annotated claim of another pod is not the pod's",
		pod:  pod(templated("gpu", "one-gpu")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("other-gpu-zzzzz", other, "gpu")},
			templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		offline: true,
		want:    []outcome{{claim: generated, generated: true}},
	}, {
		name:    "recorded in the status but not stored: made offline under the recorded name",
		pod:     withStatus(pod(templated("gpu", "one-gpu")), "gpu", ptr.To("trainer-gpu-q2w4x")),
		world:   world{templates: []*resourcev1.ResourceClaimTemplate{template("one-gpu")}},
		offline: true,
		want:    []outcome{{claim: "trainer-gpu-q2w4x", generated: true}},
	}, {
		name:    "template missing offline",
		pod:     pod(templated("gpu", "one-gpu")),
		offline: true,
		want:    []outcome{{err: `resourceclaimtemplates.resource.k8s.io "one-gpu" not found`, field: "spec.resourceClaims[0].resourceClaimTemplateName", notFound: true}},
	}, {
		name: "neither field set",
		pod:  pod(corev1.PodResourceClaim{Name: "gpu"}),
		want: []outcome{{err: fmt.Sprintf(`pod "team/trainer", spec.resourceClaim "gpu": %v`, resourceclaim.ErrAPIUnsupported), field: "spec.resourceClaims[0]"}},
	}, {
		name:  "every entry is reported, the first error returned",
		pod:   pod(named("a", "missing"), named("b", "shared")),
		world: world{claims: []*resourcev1.ResourceClaim{claim("shared", nil, "")}},
		want:  []outcome{{err: `resourceclaims.resource.k8s.io "missing" not found`, field: "spec.resourceClaims[0].resourceClaimName", notFound: true}, {claim: "shared"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.world.strict()
			if tc.offline {
				r = tc.world.offline()
			}
			entries, err := r.Resolve(tc.pod)
			if len(entries) != len(tc.want) {
				t.Fatalf("got %d entries, want %d: %+v", len(entries), len(tc.want), entries)
			}
			var firstErr error
			for i, e := range entries {
				want := tc.want[i]
				if firstErr == nil {
					firstErr = e.Err
				}
				switch {
				case want.err != "":
					if e.Err == nil || e.Err.Error() != want.err {
						t.Errorf("entry %d: error %v, want %q", i, e.Err, want.err)
					}
					if e.Claim != nil {
						t.Errorf("entry %d: claim %s beside an error", i, e.Claim.Name)
					}
					if e.Field != want.field {
						t.Errorf("entry %d: field %q, want %q", i, e.Field, want.field)
					}
					if got := IsNotFound(e.Err); got != want.notFound {
						t.Errorf("entry %d: IsNotFound = %v, want %v", i, got, want.notFound)
					}
				case e.Err != nil:
					t.Errorf("entry %d: unexpected error %v", i, e.Err)
				case e.Claim == nil || e.Claim.Name != want.claim:
					t.Errorf("entry %d: claim %v, want %s", i, e.Claim, want.claim)
				case e.Generated != want.generated:
					t.Errorf("entry %d: generated %v, want %v", i, e.Generated, want.generated)
				}
			}
			if err != firstErr {
				t.Errorf("Resolve returned %v, want the first entry error %v", err, firstErr)
			}
		})
	}
}

// TestNotCreatedWrapsUpstream: callers that know upstream's sentinel (the
// scheduler framework's users) still recognise a claim not created yet.
func TestNotCreatedWrapsUpstream(t *testing.T) {
	w := world{}
	_, err := w.strict().Resolve(pod(templated("gpu", "one-gpu")))
	if !errors.Is(err, resourceclaim.ErrClaimNotFound) || !IsNotFound(err) {
		t.Fatalf("error %v: not resourceclaim.ErrClaimNotFound, or not IsNotFound", err)
	}
}

func TestFromTemplate(t *testing.T) {
	p := pod(templated("gpu", "one-gpu"))
	tmpl := template("one-gpu")
	c := FromTemplate(p, "gpu", tmpl)
	if c.GenerateName != "trainer-gpu-" || !strings.HasPrefix(c.Name, "trainer-gpu-") || len(c.Name) != len("trainer-gpu-")+5 {
		t.Errorf("name %q, generateName %q: want trainer-gpu- and five characters", c.Name, c.GenerateName)
	}
	if again := FromTemplate(p, "gpu", tmpl); again.Name != c.Name {
		t.Errorf("the same pod and entry gave %q, then %q", c.Name, again.Name)
	}
	if otherEntry := FromTemplate(p, "gpu2", tmpl); strings.TrimPrefix(otherEntry.Name, "trainer-gpu2-") == strings.TrimPrefix(c.Name, "trainer-gpu-") {
		t.Errorf("two entries got the same suffix: %q, %q", c.Name, otherEntry.Name)
	}
	if err := resourceclaim.IsForPod(p, c, false); err != nil {
		t.Errorf("the made claim is not for its pod: %v", err)
	}
	if c.Annotations[resourcev1.PodResourceClaimAnnotation] != "gpu" || c.Annotations["note"] != "x" || c.Labels["app"] != "train" {
		t.Errorf("metadata not taken from the template and entry: annotations %v, labels %v", c.Annotations, c.Labels)
	}
	c.Spec.Devices.Requests[0].Name = "changed"
	c.Labels["app"] = "changed"
	if tmpl.Spec.Spec.Devices.Requests[0].Name != "gpu" || tmpl.Spec.ObjectMeta.Labels["app"] != "train" {
		t.Error("the made claim shares memory with its template")
	}
}

// TestGenerateName pins the resourceclaim controller's shortening: both
// parts cut in proportion, no hyphen at the end once cut.
func TestGenerateName(t *testing.T) {
	for _, tc := range []struct{ pod, entry, want string }{
		{"trainer", "gpu", "trainer-gpu-"},
		{strings.Repeat("p", 40), strings.Repeat("e", 15), strings.Repeat("p", 40) + "-" + strings.Repeat("e", 15) + "-"}, // 57: not cut
		// 58 characters: pod 40*57/58 = 39, entry 16*57/58 = 15.
		{strings.Repeat("p", 40), strings.Repeat("e", 16), strings.Repeat("p", 39) + "-" + strings.Repeat("e", 15)},
		// 102 characters: pod 60*57/102 = 33, entry 40*57/102 = 22.
		{strings.Repeat("p", 60), strings.Repeat("e", 40), strings.Repeat("p", 33) + "-" + strings.Repeat("e", 22)},
	} {
		if got := GenerateName(tc.pod, tc.entry); got != tc.want {
			t.Errorf("GenerateName(%d chars, %d chars) = %q, want %q", len(tc.pod), len(tc.entry), got, tc.want)
		}
		if got := GenerateName(tc.pod, tc.entry); len(got)+5 > 63 {
			t.Errorf("GenerateName(%d chars, %d chars): %d characters leave no room for the suffix", len(tc.pod), len(tc.entry), len(got))
		}
	}
}

// TestPodGroupOwner: with DRAWorkloadResourceClaims (KEP-5729) the claim of
// a pod's template entry may be controlled by the pod's PodGroup, as
// kube-scheduler accepts it; without, only by the pod.
func TestPodGroupOwner(t *testing.T) {
	p := withStatus(pod(templated("gpu", "one-gpu")), "gpu", ptr.To("group-gpu-abcde"))
	p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("group")}
	c := claim("group-gpu-abcde", nil, "")
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "group", UID: "group-uid", Controller: ptr.To(true)}}
	w := world{claims: []*resourcev1.ResourceClaim{c}}

	if _, err := (Resolver{Claim: w.claim}).Resolve(p); err == nil || !strings.Contains(err.Error(), "Pod is not owner") {
		t.Errorf("without the gate: error %v, want the claim refused as not the pod's", err)
	}
	entries, err := (Resolver{Claim: w.claim, AcceptPodGroupOwner: true}).Resolve(p)
	if err != nil || len(entries) != 1 || entries[0].Claim != c {
		t.Errorf("with the gate: %+v, %v; want the PodGroup's claim", entries, err)
	}
	other := p.DeepCopy()
	other.Spec.SchedulingGroup.PodGroupName = ptr.To("another")
	if _, err := (Resolver{Claim: w.claim, AcceptPodGroupOwner: true}).Resolve(other); err == nil {
		t.Error("the claim of another PodGroup was accepted")
	}
}
