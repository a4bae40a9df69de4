package monitor

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/pkg/core/pool"
	"github.com/dractl/dractl/pkg/core/state"
)

// namesPerEvent is how many devices an Event names before "+N more".
const namesPerEvent = 8

// deviceTaint is one device's taint that keeps claims off it, as the
// monitor tracks it.
type deviceTaint struct {
	slice string // the slice that lists the device
	taint string // key=value:Effect
}

// taintedDevices are the devices of a pool's current generation with a
// NoSchedule or NoExecute taint (None and unknown effects only inform),
// by device name, with the first such taint. A pool with none has nil.
func taintedDevices(u *state.PoolUsage) map[string]deviceTaint {
	var out map[string]deviceTaint
	for i := range u.Devices {
		d := u.Devices[i].Device
		for _, t := range d.Taints {
			if t.Effect != resourcev1.DeviceTaintEffectNoSchedule && t.Effect != resourcev1.DeviceTaintEffectNoExecute {
				continue
			}
			if out == nil {
				out = map[string]deviceTaint{}
			}
			s := t.Key + ":" + string(t.Effect)
			if t.Value != "" {
				s = t.Key + "=" + t.Value + ":" + string(t.Effect)
			}
			out[d.Name] = deviceTaint{slice: u.Devices[i].Slice.Name, taint: s}
			break
		}
	}
	return out
}

// reportTaints emits an Event per slice and taint for the devices of s
// tainted since the last report, and one for those whose reported taint
// went, and remembers what it reported in t.
func (m *Monitor) reportTaints(s *poolStatus, t *tracked) {
	if maps.Equal(s.tainted, t.taints) || !m.leading.Load() {
		return
	}
	type group struct{ slice, taint string }
	added, removed := map[group][]string{}, map[group][]string{}
	for dev, dt := range s.tainted {
		if t.taints[dev] != dt {
			added[group(dt)] = append(added[group(dt)], dev)
		}
	}
	for dev, dt := range t.taints {
		if now, ok := s.tainted[dev]; !ok || now.taint != dt.taint {
			// The Event goes to the slice that lists the device now, if
			// any: the old one may be gone.
			g := group(dt)
			if ok {
				g.slice = now.slice
			}
			removed[g] = append(removed[g], dev)
		}
	}
	bySlice := map[string]*pool.Slice{}
	for _, sl := range s.usage.Slices {
		bySlice[sl.Name] = sl
	}
	emit := func(groups map[group][]string, eventType, reason, verb string) {
		keys := slices.SortedFunc(maps.Keys(groups), func(a, b group) int {
			return cmp.Or(strings.Compare(a.slice, b.slice), strings.Compare(a.taint, b.taint))
		})
		for _, g := range keys {
			sl := bySlice[g.slice]
			if sl == nil && len(s.usage.Slices) > 0 {
				sl = s.usage.Slices[0]
			}
			if sl == nil {
				continue
			}
			devs := groups[g]
			slices.Sort(devs)
			m.emitOn(sl, eventType, reason, fmt.Sprintf("%s of pool %s %s %s", deviceList(devs), s.usage.ID, verb, g.taint))
		}
	}
	emit(added, corev1.EventTypeWarning, ReasonDeviceTainted, "tainted: the scheduler allocates them only to claims tolerating")
	emit(removed, corev1.EventTypeNormal, ReasonDeviceUntainted, "no longer tainted")
	t.taints = s.tainted
}

// deviceList names devices, the first few of many and how many more.
func deviceList(devs []string) string {
	word := "devices"
	if len(devs) == 1 {
		word = "device"
	}
	if len(devs) <= namesPerEvent {
		return word + " " + strings.Join(devs, ", ")
	}
	return fmt.Sprintf("%s %s and %d more", word, strings.Join(devs[:namesPerEvent], ", "), len(devs)-namesPerEvent)
}
