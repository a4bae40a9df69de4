package informer_test

import (
	"errors"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/dractl/dractl/pkg/core/api"
	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/state/informer"
)

// logLines returns a logger that keeps every line up to V(4), and the
// lines.
func logLines() (logr.Logger, *[]string) {
	var lines []string
	return funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 4}), &lines
}

func claimWith(name, device string) *resourcev1.ResourceClaim {
	c := at.Claim(name).Request(at.Request("gpu", "gpu")).Obj()
	if device != "" {
		c = at.Claim(name).Request(at.Request("gpu", "gpu")).
			Allocated(at.Result("gpu", "gpu.example.com", "node-1", device)).Obj()
	}
	return c
}

// TestDeltasLogEveryRefusal: every delta the State refuses is logged as
// an error naming the object and the reason, and reaches Then with the
// refusal; a deletion of what the State does not hold is logged at V(4).
func TestDeltasLogEveryRefusal(t *testing.T) {
	st := state.New(state.Options{})
	logger, lines := logLines()
	var seen []informer.Delta[*resourcev1.ResourceClaim]
	d := informer.Claims(st)
	d.Then = func(ev informer.Delta[*resourcev1.ResourceClaim]) { seen = append(seen, ev) }
	h := d.Handler(logger)

	h.OnAdd(claimWith("a", "gpu-0"), false)
	// b takes the device a holds: the State refuses it.
	h.OnAdd(claimWith("b", "gpu-0"), false)
	if len(*lines) != 1 {
		t.Fatalf("log after a refused set: %q, want one line", *lines)
	}
	line := (*lines)[0]
	for _, want := range []string{`"msg"="Not applied to the allocation state"`, `"error"=`, "gpu-0 is already allocated to claim default/a",
		`"kind"="ResourceClaim"`, `"object"={"name"="b" "namespace"="default"}`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s lacks %s", line, want)
		}
	}
	var conflict *state.ConflictError
	if len(seen) != 2 || seen[0].Err != nil || !errors.As(seen[1].Err, &conflict) || seen[1].Obj.Name != "b" {
		t.Fatalf("Then saw %+v, want a's set applied and b's refused with a conflict", seen)
	}

	// b was never held: its deletion, from a tombstone, changes nothing.
	*lines = nil
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/b", Obj: claimWith("b", "gpu-0")})
	if len(*lines) != 1 || !strings.Contains((*lines)[0], `"level"=4`) || !strings.Contains((*lines)[0], "not known to the state") {
		t.Errorf("log after deleting what the State never held: %q, want one V(4) line", *lines)
	}
	if last := seen[len(seen)-1]; !last.Deleted || last.Obj.Name != "b" || last.Err == nil {
		t.Errorf("Then saw %+v, want b's deletion, refused", last)
	}

	// An update hands Then the object before; the tombstone of a's
	// deletion is unwrapped and applied.
	*lines = nil
	h.OnUpdate(claimWith("a", "gpu-0"), claimWith("a", "gpu-1"))
	if last := seen[len(seen)-1]; last.Old == nil || last.Old.Status.Allocation.Devices.Results[0].Device != "gpu-0" || last.Err != nil {
		t.Errorf("Then saw %+v for an update, want the object before and no error", last)
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: claimWith("a", "gpu-1")})
	if claims := st.Snapshot().Claims(); len(claims) != 0 || len(*lines) != 0 {
		t.Errorf("after a's deletion: claims %v, log %q; want none", claims, *lines)
	}

	// An object of another kind is logged and not applied.
	h.OnAdd(&resourcev1.DeviceClass{}, false)
	if len(*lines) != 1 || !strings.Contains((*lines)[0], "unexpected type") || !strings.Contains((*lines)[0], "*v1.DeviceClass") {
		t.Errorf("log after an object of another type: %q", *lines)
	}
}

// TestSlicesAndClassesApply: slices and classes reach the State through their
// deltas.
func TestSlicesAndClassesApply(t *testing.T) {
	st := state.New(state.Options{})
	logger, lines := logLines()
	s, err := api.ToUpstream(at.Slice("s").Driver("gpu.example.com").Pool("node-1").Node("node-1").Device(at.Device("gpu-0")).Obj())
	if err != nil {
		t.Fatal(err)
	}
	informer.Slices(st).Handler(logger).OnAdd(s, false)
	informer.Classes(st).Handler(logger).OnAdd(at.Class("gpu", "true"), false)
	snap := st.Snapshot()
	if len(snap.Slices()) != 1 || len(snap.Classes()) != 1 || len(*lines) != 0 {
		t.Fatalf("State holds %d slices and %d classes, log %q; want one each, no log", len(snap.Slices()), len(snap.Classes()), *lines)
	}
	informer.Slices(st).Handler(logger).OnDelete(s)
	if n := len(st.Snapshot().Slices()); n != 0 {
		t.Errorf("%d slices after the deletion", n)
	}
}

type refusingSource struct{}

func (refusingSource) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, errors.New("handler was not added to shared informer because it has stopped already")
}

// TestWatchReturnsRegistrationErrors: a source that refuses the handlers
// is an error naming the kind, not a State that never hears anything.
func TestWatchReturnsRegistrationErrors(t *testing.T) {
	logger, _ := logLines()
	_, err := informer.Watch(logger, refusingSource{}, informer.Claims(state.New(state.Options{})))
	if err == nil || !strings.Contains(err.Error(), "watch ResourceClaim objects: handler was not added") {
		t.Fatalf("Watch on a stopped source: %v", err)
	}
}
