package schedplugin

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/allocator"
)

func TestDecodeArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args runtime.Object
		want config
		err  string
	}{
		{name: "none", args: nil, want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "empty", args: &runtime.Unknown{}, want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "yaml", args: &runtime.Unknown{Raw: []byte("strategy: BestFit\nfilterTimeout: 0s\nbindingTimeout: 30s\n")},
			want: config{strategy: allocator.BestFit, bindingTimeout: 30 * time.Second, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "no bound on bindings", args: &runtime.Unknown{Raw: []byte("bindingsInFlight: 0\n")},
			want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout}},
		{name: "bindings in flight", args: &Args{BindingsInFlight: ptr.To[int32](8)},
			want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: 8}},
		{name: "json", args: &runtime.Unknown{Raw: []byte(`{"filterTimeout":"2s"}`), ContentType: runtime.ContentTypeJSON},
			want: config{strategy: allocator.FirstFit, filterTimeout: 2 * time.Second, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "typed", args: &Args{Strategy: "FirstFit"}, want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "inline explanation", args: &runtime.Unknown{Raw: []byte("explanation: Inline\n")},
			want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight, inline: true}},
		{name: "explanation as an event", args: &Args{Explanation: ExplanationEvent},
			want: config{strategy: allocator.FirstFit, filterTimeout: DefaultFilterTimeout, bindingTimeout: DefaultBindingTimeout, bindingsInFlight: DefaultBindingsInFlight}},
		{name: "bad explanation", args: &runtime.Unknown{Raw: []byte("explanation: Loud\n")}, err: `args.explanation: Unsupported value: "Loud"`},
		{name: "unknown field", args: &runtime.Unknown{Raw: []byte("strategy: BestFit\nscoring: x\n")}, err: `unknown field "scoring"`},
		{name: "bad strategy", args: &runtime.Unknown{Raw: []byte("strategy: WorstFit\n")}, err: `args.strategy: Unsupported value: "WorstFit"`},
		{name: "negative filter timeout", args: &runtime.Unknown{Raw: []byte("filterTimeout: -1s\n")}, err: "args.filterTimeout: Invalid value"},
		{name: "zero binding timeout", args: &runtime.Unknown{Raw: []byte("bindingTimeout: 0s\n")}, err: "args.bindingTimeout: Invalid value"},
		{name: "negative bindings in flight", args: &runtime.Unknown{Raw: []byte("bindingsInFlight: -1\n")}, err: "args.bindingsInFlight: Invalid value: -1"},
		{name: "not yaml", args: &runtime.Unknown{Raw: []byte("strategy: [\n")}, err: "args:"},
		{name: "wrong type", args: &runtime.Unknown{Raw: []byte("strategy: 3\n")}, err: "args:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeArgs(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
