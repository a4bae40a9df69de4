package render_test

import (
	"bytes"
	"strings"
	"testing"

	at "github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/core/features"
	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/ops/render"
)

// A device the State left out (here: it includes a mixin while
// DRAResourceSliceMixins is off) is named in the pool's text, with its
// slice, field path and reason.
func TestPoolTextNamesLeftOutDevices(t *testing.T) {
	st := state.New(state.Options{Features: features.All().With(features.ResourceSliceMixins, false)})
	at.Must(t, st.SetMixinSlice(at.Slice("devices").Driver("d.example.com").Pool("p").Node("n").Count(1).
		DeviceMixin("common", "model", "x").
		Device(at.Device("plain"), at.Device("mixed").Includes("common")).Obj()))
	var text bytes.Buffer
	at.Must(t, render.PoolText(&text, st.Snapshot().Usage(pool.ID{Driver: "d.example.com", Pool: "p"}), render.Options{}))
	for _, want := range []string{
		"Devices:  1:",
		"Left out: ResourceSlice devices: spec.devices[1].includes: Forbidden: DRAResourceSliceMixins is disabled",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("pool text lacks %q:\n%s", want, text.String())
		}
	}
}
