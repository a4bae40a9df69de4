package nvmlgpu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/dractl/dractl/pkg/driver/mig"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// IgnoredXIDs are XID errors that say an application faulted, not the GPU,
// so they leave the GPU healthy: 13 (graphics engine exception), 31 (GPU
// memory page fault), 43 (GPU stopped processing), 45 (preemptive
// cleanup), 68 (video processor exception) and 109 (context switch
// timeout). NVIDIA's device plugin skips the same ones.
var IgnoredXIDs = []uint64{13, 31, 43, 45, 68, 109}

// NoticeLifetime is how long an ignored XID stays a notice of its GPU
// (driverkit.NoticeProfile): a recent application fault, shown as an
// informational taint, not a broken GPU.
const NoticeLifetime = 10 * time.Minute

// health is what the XID watcher learnt: unhealthy GPUs by UUID, and the
// last ignored XID of each GPU with when it came.
type health struct {
	mu        sync.Mutex
	unhealthy map[string]string
	notices   map[string]notice
	now       func() time.Time
}

type notice struct {
	reason string
	at     time.Time
}

func (h *health) init() {
	h.unhealthy, h.notices = map[string]string{}, map[string]notice{}
	if h.now == nil {
		h.now = time.Now
	}
}

// WatchHealth listens to the GPUs' XID critical errors until ctx is done;
// a GPU with one (not in IgnoredXIDs) is unhealthy from then on, with all
// its devices, until the driver restarts. GPUs that cannot report events
// are logged and left healthy.
func (g *GPUs) WatchHealth(ctx context.Context) error {
	es, ret := g.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nvmlError("create NVML event set", ret)
	}
	defer es.Free()
	watched := 0
	for _, gp := range g.gpus {
		supported, ret := gp.dev.GetSupportedEventTypes()
		if ret == nvml.SUCCESS && supported&nvml.EventTypeXidCriticalError != 0 {
			ret = gp.dev.RegisterEvents(nvml.EventTypeXidCriticalError, es)
		}
		if ret != nvml.SUCCESS || supported&nvml.EventTypeXidCriticalError == 0 {
			g.log.Info("GPU does not report XID errors; its health is not watched", "gpu", gp.Index, "uuid", gp.UUID, "nvml", ret.Error())
			continue
		}
		watched++
	}
	if watched == 0 {
		<-ctx.Done()
		return nil
	}
	for ctx.Err() == nil {
		e, ret := es.Wait(1000)
		switch {
		case ret == nvml.ERROR_TIMEOUT:
			continue
		case ret != nvml.SUCCESS:
			g.log.Error(ret, "Waiting for NVML events failed; retrying")
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		g.event(e)
	}
	return nil
}

func (g *GPUs) event(e nvml.EventData) {
	if e.EventType != nvml.EventTypeXidCriticalError {
		return
	}
	uuid, ret := e.Device.GetUUID()
	if ret != nvml.SUCCESS {
		g.log.Error(ret, "XID error of a GPU without UUID", "xid", e.EventData)
		return
	}
	if gp := g.gpuOf(uuid); gp == nil {
		// A MIG device handle: the parent GPU is the one to mark.
		parent, ret := e.Device.GetDeviceHandleFromMigDeviceHandle()
		if ret == nvml.SUCCESS {
			uuid, _ = parent.GetUUID()
		}
	}
	reason := fmt.Sprintf("XID %d", e.EventData)
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	if slices.Contains(IgnoredXIDs, e.EventData) {
		g.log.V(2).Info("Application XID on a GPU; it stays healthy", "uuid", uuid, "xid", e.EventData)
		g.health.notices[uuid] = notice{reason: reason, at: g.health.now()}
		return
	}
	g.log.Info("GPU is unhealthy", "uuid", uuid, "reason", reason)
	g.health.unhealthy[uuid] = reason
}

// Health implements driverkit.HealthProfile: every device of a GPU that
// reported an XID critical error.
func (g *GPUs) Health(context.Context) (map[prepare.DeviceKey]string, error) {
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	return g.devicesOf(func(uuid string) (string, bool) {
		reason, bad := g.health.unhealthy[uuid]
		return reason, bad
	}), nil
}

// Notices implements driverkit.NoticeProfile: every device of a GPU that
// reported an ignored XID (IgnoredXIDs) in the last NoticeLifetime, with
// the last such XID.
func (g *GPUs) Notices(context.Context) (map[prepare.DeviceKey]string, error) {
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	now := g.health.now()
	for uuid, n := range g.health.notices {
		if now.Sub(n.at) >= NoticeLifetime {
			delete(g.health.notices, uuid)
		}
	}
	return g.devicesOf(func(uuid string) (string, bool) {
		n, ok := g.health.notices[uuid]
		return n.reason, ok
	}), nil
}

// devicesOf maps what of gets for a GPU's UUID to the GPU's devices.
func (g *GPUs) devicesOf(of func(uuid string) (string, bool)) map[prepare.DeviceKey]string {
	out := map[prepare.DeviceKey]string{}
	for _, gp := range g.gpus {
		reason, ok := of(gp.UUID)
		if !ok {
			continue
		}
		out[prepare.DeviceKey{Pool: g.opts.Node, Device: mig.GPUDeviceName(gp.Index)}] = reason
		if gp.MIG {
			for _, p := range gp.Model.Partitions(gp.Index) {
				out[prepare.DeviceKey{Pool: g.opts.Node, Device: p.DeviceName()}] = reason
			}
		}
	}
	return out
}
