package schedplugin

import (
	"bytes"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/dractl/dractl/pkg/core/allocator"
)

// Args are the plugin's arguments in a KubeSchedulerConfiguration
// (pluginConfig[].args). Unknown fields are an error.
type Args struct {
	// Strategy picks devices on a node and ranks nodes: FirstFit (the
	// default) picks what the in-tree plugin would pick and scores like it;
	// BestFit packs partially used counter sets and prefers the nodes whose
	// devices are already the most used.
	Strategy string `json:"strategy,omitempty"`
	// FilterTimeout bounds the search on one node (DRASchedulerFilterTimeout);
	// zero disables it. Default 10s, as in-tree.
	FilterTimeout *metav1.Duration `json:"filterTimeout,omitempty"`
	// BindingTimeout is how long PreBind waits for binding conditions, and
	// how old an allocation with unmet binding conditions may get before
	// the claim is deallocated. Default 600s, as in-tree.
	BindingTimeout *metav1.Duration `json:"bindingTimeout,omitempty"`
	// BindingsInFlight bounds the plugin's pods between Reserve and the end
	// of PreBind's writes: while that many are, the next pod's cycle waits
	// in PreFilter, so that pods are bound about in the order they were
	// scheduled instead of all near the end. Zero lifts the bound.
	// Default 64.
	BindingsInFlight *int32 `json:"bindingsInFlight,omitempty"`
	// Explanation is where dractl's per-claim account of why no node fits
	// goes. Event (the default): kube-scheduler's PodScheduled condition
	// keeps the in-tree plugin's words (users' alerts and upstream's tests
	// match them), and the account is a Warning Event on the pod, reason
	// DevicesUnavailable. Inline: the account replaces them in the
	// condition, per node and summed up.
	Explanation string `json:"explanation,omitempty"`
}

// The values of Args.Explanation.
const (
	ExplanationEvent  = "Event"
	ExplanationInline = "Inline"
)

// Defaults are the in-tree DynamicResources plugin's.
const (
	DefaultFilterTimeout  = 10 * time.Second
	DefaultBindingTimeout = 600 * time.Second
)

// DefaultBindingsInFlight keeps a 2-core control plane's API server as busy
// as with no bound (measured in the race; see docs/performance.md).
const DefaultBindingsInFlight = 64

// config is Args, defaulted and validated.
type config struct {
	strategy       allocator.Strategy
	filterTimeout  time.Duration
	bindingTimeout time.Duration
	// bindingsInFlight: zero for no bound.
	bindingsInFlight int
	// inline: dractl's explanation in the pod's condition instead of the
	// in-tree plugin's words (Args.Explanation).
	inline bool
}

// decodeArgs reads the plugin's args: nil (no pluginConfig entry), the
// *runtime.Unknown kube-scheduler hands to out-of-tree plugins, or *Args.
func decodeArgs(obj runtime.Object) (config, error) {
	var args Args
	switch a := obj.(type) {
	case nil:
	case *Args:
		args = *a
	case *runtime.Unknown:
		if len(bytes.TrimSpace(a.Raw)) > 0 {
			raw, err := yaml.YAMLToJSON(a.Raw)
			if err != nil {
				return config{}, fmt.Errorf("args: %w", err)
			}
			strict, err := json.UnmarshalStrict(raw, &args)
			if err != nil {
				return config{}, fmt.Errorf("args: %w", err)
			}
			if len(strict) > 0 {
				return config{}, fmt.Errorf("args: %v", strict[0])
			}
		}
	default:
		return config{}, fmt.Errorf("args: got %T, want *runtime.Unknown or *schedplugin.Args", obj)
	}
	return args.complete()
}

func (a Args) complete() (config, error) {
	c := config{filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}
	switch a.Strategy {
	case "", allocator.FirstFit.String():
		c.strategy = allocator.FirstFit
	case allocator.BestFit.String():
		c.strategy = allocator.BestFit
	default:
		return config{}, fmt.Errorf("args.strategy: Unsupported value: %q: supported values: %q, %q", a.Strategy, allocator.FirstFit, allocator.BestFit)
	}
	if a.FilterTimeout != nil {
		if a.FilterTimeout.Duration < 0 {
			return config{}, fmt.Errorf("args.filterTimeout: Invalid value: %q: must be zero (no timeout) or positive", a.FilterTimeout.Duration)
		}
		c.filterTimeout = a.FilterTimeout.Duration
	}
	if a.BindingTimeout != nil {
		if a.BindingTimeout.Duration <= 0 {
			return config{}, fmt.Errorf("args.bindingTimeout: Invalid value: %q: must be positive", a.BindingTimeout.Duration)
		}
		c.bindingTimeout = a.BindingTimeout.Duration
	}
	if a.BindingsInFlight != nil {
		if *a.BindingsInFlight < 0 {
			return config{}, fmt.Errorf("args.bindingsInFlight: Invalid value: %d: must be zero (no bound) or positive", *a.BindingsInFlight)
		}
		c.bindingsInFlight = int(*a.BindingsInFlight)
	}
	switch a.Explanation {
	case "", ExplanationEvent:
	case ExplanationInline:
		c.inline = true
	default:
		return config{}, fmt.Errorf("args.explanation: Unsupported value: %q: supported values: %q, %q", a.Explanation, ExplanationEvent, ExplanationInline)
	}
	return c, nil
}

// DeepCopyObject and GetObjectKind let *Args be passed where
// kube-scheduler passes plugin args (a runtime.Object).
func (a *Args) DeepCopyObject() runtime.Object {
	out := *a
	if a.FilterTimeout != nil {
		d := *a.FilterTimeout
		out.FilterTimeout = &d
	}
	if a.BindingTimeout != nil {
		d := *a.BindingTimeout
		out.BindingTimeout = &d
	}
	if a.BindingsInFlight != nil {
		n := *a.BindingsInFlight
		out.BindingsInFlight = &n
	}
	return &out
}

func (a *Args) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
