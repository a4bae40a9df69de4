package workload

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func valid() *Workload {
	w := &Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "mix", Namespace: "default"},
		Spec: Spec{Seed: 1, Pods: 10, Mix: []MixEntry{
			{Name: "small", Weight: 3, ResourceClaimTemplates: []string{"mig-1g"}},
			{Name: "large", Weight: 1, ResourceClaimTemplates: []string{"mig-7g", "nic"}},
		}},
	}
	SetDefaults(w)
	return w
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Workload)
		want []string // field paths, in order
	}{
		"valid":             {func(*Workload) {}, nil},
		"no pods":           {func(w *Workload) { w.Spec.Pods = 0 }, []string{"spec.pods"}},
		"too many pods":     {func(w *Workload) { w.Spec.Pods = MaxPods + 1 }, []string{"spec.pods"}},
		"zero interarrival": {func(w *Workload) { w.Spec.MeanInterarrival.Duration = 0 }, []string{"spec.meanInterarrival"}},
		"negative lifetime": {func(w *Workload) { w.Spec.MeanLifetime = &metav1.Duration{Duration: -time.Second} }, []string{"spec.meanLifetime"}},
		"no mix":            {func(w *Workload) { w.Spec.Mix = nil }, []string{"spec.mix"}},
		"bad entry": {func(w *Workload) {
			w.Spec.Mix[1] = MixEntry{Name: "Small_", Weight: 0, ResourceClaimTemplates: nil, MeanLifetime: &metav1.Duration{}}
		}, []string{"spec.mix[1].name", "spec.mix[1].weight", "spec.mix[1].resourceClaimTemplates", "spec.mix[1].meanLifetime"}},
		"duplicate kind":    {func(w *Workload) { w.Spec.Mix[1].Name = "small" }, []string{"spec.mix[1].name"}},
		"bad template name": {func(w *Workload) { w.Spec.Mix[0].ResourceClaimTemplates[0] = "Not/A/Name" }, []string{"spec.mix[0].resourceClaimTemplates[0]"}},
		"bad name":          {func(w *Workload) { w.Name = "" }, []string{"metadata.name"}},
	} {
		t.Run(name, func(t *testing.T) {
			w := valid()
			tc.edit(w)
			var got []string
			for _, e := range Validate(w) {
				got = append(got, e.Field)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("errors at %v, want %v (%v)", got, tc.want, Validate(w))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	w := &Workload{}
	SetDefaults(w)
	if w.Spec.MeanInterarrival == nil || w.Spec.MeanInterarrival.Duration != time.Second {
		t.Errorf("meanInterarrival defaults to %v, want 1s", w.Spec.MeanInterarrival)
	}
	if w.Spec.MeanLifetime != nil {
		t.Error("meanLifetime must stay unset: pods then never leave")
	}
}
