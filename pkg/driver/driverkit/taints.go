package driverkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// Device health becomes device taints (KEP-5055) on the driver's own
// slices, so that the scheduler stops placing new claims on a device its
// driver knows is broken. This file is the one place of the taints the
// kit writes:
//
//	key                       value                 effect
//	dractl.dev/unhealthy      the Profile's reason  NoSchedule (NoExecute with HealthTaints.Evict)
//	dractl.dev/health-event   the Profile's notice  None (with HealthTaints.Notices)
//
// The value is the reason or notice as a label value: characters a label
// value cannot hold become '-', cut to 63 ("XID 79: fallen off the bus"
// becomes "XID-79-fallen-off-the-bus"); the kubelet's health API and the
// pod's status carry the reason as written.
//
// A device's taint also goes to every device sharing a counter set it
// consumes whole: KEP-4815's partitions draw on their
// GPU's counter set, and the GPU is the device that takes all of it, so a
// partition of an unhealthy GPU is tainted with it.
//
// The taint goes when the Profile reports the device healthy again. A
// device the driver does not publish is logged once (while the Profile
// keeps reporting it) and counted (dractl_driver_health_events_total with
// event "unknown_device"), never tainted.
//
// Taints travel as every other published change: the kit hands the new
// slices to the resourceslice controller, which writes them in the
// background and retries a refused write with its queue's exponential
// backoff; a prepare never waits for it.
const (
	// TaintKeyUnhealthy marks a device its Profile reports unhealthy.
	TaintKeyUnhealthy = "dractl.dev/unhealthy"
	// TaintKeyHealthEvent marks a device its Profile reports an event of
	// that it does not hold against the device's health.
	TaintKeyHealthEvent = "dractl.dev/health-event"
)

// HealthTaints configures the taints of a HealthProfile's devices.
type HealthTaints struct {
	// Disabled publishes no taints; health still reaches the kubelet.
	Disabled bool
	// Evict taints unhealthy devices NoExecute instead of NoSchedule:
	// the pods using them are then evicted (kube-controller-manager's
	// device taint eviction), which an operator opts into.
	Evict bool
	// Notices publishes a NoticeProfile's events as taints of effect
	// None, which only inform. kube-apiserver 1.36 and 1.37 accept the
	// effect in resource.k8s.io/v1 wherever they accept taints
	// (DRADeviceTaints); an older server refuses the slice.
	Notices bool
}

// effect is the effect of an unhealthy device's taint.
func (h HealthTaints) effect() resourcev1.DeviceTaintEffect {
	if h.Evict {
		return resourcev1.DeviceTaintEffectNoExecute
	}
	return resourcev1.DeviceTaintEffectNoSchedule
}

// NoticeProfile is a HealthProfile that also reports events it does not
// hold against a device's health (on a GPU, an application's fault); the
// kit publishes them as informational taints (HealthTaints.Notices).
type NoticeProfile interface {
	HealthProfile
	// Notices reports, by pool and device name, the devices with a
	// recent event and what it was.
	Notices(ctx context.Context) (map[prepare.DeviceKey]string, error)
}

// taintSet is every taint the kit puts on its devices.
type taintSet map[prepare.DeviceKey][]api.DeviceTaint

// of is the taints of one device, as publish.BuildTainted takes them.
func (t taintSet) of(pool, device string) []api.DeviceTaint {
	return t[prepare.DeviceKey{Pool: pool, Device: device}]
}

func (t taintSet) equal(o taintSet) bool {
	return maps.EqualFunc(t, o, func(a, b []api.DeviceTaint) bool {
		return slices.EqualFunc(a, b, func(x, y api.DeviceTaint) bool {
			return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect
		})
	})
}

// labelValue turns a reason into a taint value: a label value.
func labelValue(s string) string {
	b := []byte(strings.TrimSpace(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	out := string(b)
	// Runs of '-' from ": " and the like read as one.
	for strings.Contains(out, "--") {
		out = strings.ReplaceAll(out, "--", "-")
	}
	if len(out) > validation.LabelValueMaxLength {
		out = out[:validation.LabelValueMaxLength]
	}
	return strings.Trim(out, "-_.")
}

// healthTaints computes the taints of the inventory's devices from what
// the Profile reported, and lists the reported devices the inventory does
// not have.
func healthTaints(inv prepare.Inventory, unhealthy, notices map[prepare.DeviceKey]string, cfg HealthTaints) (taintSet, []prepare.DeviceKey) {
	out := taintSet{}
	var unknown []prepare.DeviceKey
	put := func(k prepare.DeviceKey, t api.DeviceTaint) {
		if !slices.ContainsFunc(out[k], func(x api.DeviceTaint) bool { return x.Key == t.Key }) {
			out[k] = append(out[k], t)
		}
	}
	// Sorted, so that a device under two unhealthy parents takes the
	// same taint every time.
	for _, k := range sortedKeys(unhealthy) {
		if !inv.Known(k) {
			unknown = append(unknown, k)
			continue
		}
		t := api.DeviceTaint{Key: TaintKeyUnhealthy, Value: labelValue(unhealthy[k]), Effect: cfg.effect()}
		put(k, t)
		for _, child := range inv.Children(k) {
			put(child, t)
		}
	}
	if cfg.Notices {
		for _, k := range sortedKeys(notices) {
			if !inv.Known(k) {
				unknown = append(unknown, k)
				continue
			}
			t := api.DeviceTaint{Key: TaintKeyHealthEvent, Value: labelValue(notices[k]), Effect: resourcev1.DeviceTaintEffectNone}
			put(k, t)
			for _, child := range inv.Children(k) {
				put(child, t)
			}
		}
	}
	for k := range out {
		// The unhealthy taint first, as kubectl lists the worst first.
		slices.SortStableFunc(out[k], func(a, b api.DeviceTaint) int { return strings.Compare(b.Key, a.Key) })
	}
	return out, unknown
}

func sortedKeys[V any](m map[prepare.DeviceKey]V) []prepare.DeviceKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b prepare.DeviceKey) int { return strings.Compare(a.String(), b.String()) })
}

// healthState is what the driver last made of its Profile's health.
type healthState struct {
	unhealthy map[prepare.DeviceKey]string
	// unknown are the reported devices the driver does not publish,
	// logged when they first appear.
	unknown map[prepare.DeviceKey]bool
	taints  taintSet
}

// watchTaints polls the Profile's health every HealthInterval and
// republishes when the taints change, until ctx ends.
func (d *Driver) watchTaints(ctx context.Context, hp HealthProfile) {
	tick := time.NewTicker(d.opts.HealthInterval)
	defer tick.Stop()
	for {
		if err := d.syncHealth(ctx, hp); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Device health; the taints stay as they are")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// syncHealth reads the Profile's health once, counts what changed and
// republishes the taints if they changed.
func (d *Driver) syncHealth(ctx context.Context, hp HealthProfile) error {
	logger := klog.FromContext(ctx)
	bad, err := hp.Health(ctx)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	var notices map[prepare.DeviceKey]string
	if np, ok := hp.(NoticeProfile); ok && d.opts.HealthTaints.Notices {
		if notices, err = np.Notices(ctx); err != nil {
			return fmt.Errorf("health notices: %w", err)
		}
	}
	inv := d.inventory()
	taints, unknown := healthTaints(inv, bad, notices, d.opts.HealthTaints)

	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	h := &d.health
	var sick, well []prepare.DeviceKey
	for _, k := range sortedKeys(bad) {
		if _, was := h.unhealthy[k]; !was && inv.Known(k) {
			sick = append(sick, k)
			d.metrics.healthEvent(HealthEventUnhealthy)
		}
	}
	for _, k := range sortedKeys(h.unhealthy) {
		if _, still := bad[k]; !still && inv.Known(k) {
			well = append(well, k)
			d.metrics.healthEvent(HealthEventHealthy)
		}
	}
	if len(sick) > 0 {
		logger.Info("Devices are unhealthy", "devices", sick, "reason", bad[sick[0]])
	}
	if len(well) > 0 {
		logger.Info("Devices are healthy again", "devices", well)
	}
	seen := map[prepare.DeviceKey]bool{}
	for _, k := range unknown {
		seen[k] = true
		if !h.unknown[k] {
			logger.Error(nil, "Health reported for a device this driver does not publish; ignored", "device", k)
			d.metrics.healthEvent(HealthEventUnknownDevice)
		}
	}
	h.unhealthy, h.unknown = bad, seen
	if d.opts.HealthTaints.Disabled || taints.equal(h.taints) {
		return nil
	}
	if err := d.publishLocked(ctx, d.desc, taints); err != nil {
		return err
	}
	logger.V(2).Info("Republished with device taints", "tainted", len(taints))
	return nil
}

// Taints returns the taints the driver publishes now, by device.
func (d *Driver) Taints() map[prepare.DeviceKey][]api.DeviceTaint {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	out := make(map[prepare.DeviceKey][]api.DeviceTaint, len(d.health.taints))
	for k, ts := range d.health.taints {
		out[k] = slices.Clone(ts)
	}
	return out
}
