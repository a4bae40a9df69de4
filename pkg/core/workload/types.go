// Package workload defines the Workload kind that `dractl simulate` reads:
// a declared mix of pods, each with ResourceClaims made from
// ResourceClaimTemplates, arriving and leaving at random with given mean
// rates. It holds the type, its defaults and its validation, so that
// pkg/core/decode reads it as strictly as the Kubernetes kinds.
package workload

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, version and kind of a Workload.
const (
	GroupName  = "simulate.dractl.dev"
	Version    = "v1alpha1"
	APIVersion = GroupName + "/" + Version
	Kind       = "Workload"
)

// Annotations that place a Pod or ResourceClaim of an explicit workload in
// time. Values are Go durations ("90s", "1h30m").
const (
	// ArrivalAnnotation is when the pod arrives, from the start of the
	// simulation. Without it a pod arrives DefaultInterarrival after the
	// one before it in the input.
	ArrivalAnnotation = GroupName + "/arrival"
	// LifetimeAnnotation is how long the pod runs once placed; without it
	// the pod never leaves.
	LifetimeAnnotation = GroupName + "/lifetime"
)

// Workload is a generated stream of pods: Spec.Pods pods, each drawn from
// Spec.Mix by weight, arriving with exponentially distributed gaps of mean
// Spec.MeanInterarrival and, if Spec.MeanLifetime is set, leaving after an
// exponentially distributed lifetime of that mean. The same seed gives the
// same stream.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec Spec `json:"spec"`
}

// Spec declares the mix.
type Spec struct {
	// Seed seeds the random stream.
	Seed int64 `json:"seed"`
	// Pods is how many pods arrive.
	Pods int32 `json:"pods"`
	// MeanInterarrival is the mean time between two arrivals. Default: 1s.
	MeanInterarrival *metav1.Duration `json:"meanInterarrival,omitempty"`
	// MeanLifetime is the mean time a placed pod runs. Unset: pods never
	// leave, and the run measures how many fit.
	MeanLifetime *metav1.Duration `json:"meanLifetime,omitempty"`
	// Mix are the kinds of pod, drawn by weight.
	Mix []MixEntry `json:"mix"`
}

// MixEntry is one kind of pod.
type MixEntry struct {
	// Name names the kind in reports; pods are named after it.
	Name string `json:"name"`
	// Weight is the relative frequency of this kind.
	Weight int32 `json:"weight"`
	// ResourceClaimTemplates name templates in the workload's namespace;
	// each pod gets one claim from each, allocated together as the claims
	// of one pod are.
	ResourceClaimTemplates []string `json:"resourceClaimTemplates"`
	// MeanLifetime overrides the spec's mean lifetime for this kind.
	MeanLifetime *metav1.Duration `json:"meanLifetime,omitempty"`
	// Priority is the pods' spec.priority (what a PriorityClass gives
	// them): pods waiting to be scheduled are tried higher priority first.
	// Default 0. Pods are not preempted.
	Priority int32 `json:"priority,omitempty"`
}

// DefaultInterarrival is the gap between arrivals when none is declared.
const DefaultInterarrival = 1e9 // one second, in time.Duration units

// MaxPods bounds Spec.Pods: a simulation holds every pod of its stream.
const MaxPods = 10_000_000

// MaxMixEntries bounds Spec.Mix.
const MaxMixEntries = 256
