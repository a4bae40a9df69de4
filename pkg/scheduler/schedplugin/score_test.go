package schedplugin

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	at "github.com/dractl/dractl/pkg/core/coretest"
)

// PreScore skips Score exactly when every node would get the same score.
func TestPreScoreSkipsConstantScores(t *testing.T) {
	sub := at.Claim("sub").FirstAvailable("gpu", at.Request("big", "gpu").Count(2), at.Request("small", "gpu")).Obj()
	sub.ResourceVersion = "1"
	allocated := at.Claim("done").Request(at.Request("gpu", "gpu")).
		Allocated(at.Result("gpu", driver, "node-1", "gpu-0")).Obj()
	allocated.ResourceVersion = "1"
	for _, tc := range []struct {
		name     string
		args     runtime.Object
		claim    string
		wantSkip bool
	}{
		{name: "first fit, plain request", claim: "plain", wantSkip: true},
		{name: "first fit, subrequests", claim: "sub", wantSkip: false},
		{name: "best fit", args: &Args{Strategy: "BestFit"}, claim: "plain", wantSkip: false},
		{name: "nothing to allocate", args: &Args{Strategy: "BestFit"}, claim: "done", wantSkip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.args, append(gpuObjects(t), gpuClaim("plain", 1), sub, allocated)...)
			ctx := context.Background()
			pod := gpuPod("pod", tc.claim)
			cs := newCycleState()
			if _, st := c.pl.PreFilter(ctx, cs, pod, nil); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			st := c.pl.PreScore(ctx, cs, pod, nil)
			if got := st.Code() == fwk.Skip; got != tc.wantSkip || !got && !st.IsSuccess() {
				t.Errorf("PreScore: %v, want skip %v", st, tc.wantSkip)
			}
		})
	}
}
