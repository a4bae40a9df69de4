package nvmlgpu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/dractl/dractl/pkg/driverkit"
	"github.com/dractl/dractl/pkg/mig"
)

// IgnoredXIDs are XID errors that say an application faulted, not the GPU,
// so they leave the GPU healthy: 13 (graphics engine exception), 31 (GPU
// memory page fault), 43 (GPU stopped processing), 45 (preemptive
// cleanup), 68 (video processor exception) and 109 (context switch
// timeout). NVIDIA's device plugin skips the same ones.
var IgnoredXIDs = []uint64{13, 31, 43, 45, 68, 109}

// health is what the XID watcher learnt: unhealthy GPUs by UUID.
type health struct {
	mu        sync.Mutex
	unhealthy map[string]string
}

func (h *health) init() { h.unhealthy = map[string]string{} }

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
	if e.EventType != nvml.EventTypeXidCriticalError || slices.Contains(IgnoredXIDs, e.EventData) {
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
	g.log.Info("GPU is unhealthy", "uuid", uuid, "reason", reason)
	g.health.mu.Lock()
	g.health.unhealthy[uuid] = reason
	g.health.mu.Unlock()
}

// Health implements driverkit.HealthProfile: every device of a GPU that
// reported an XID critical error.
func (g *GPUs) Health(context.Context) (map[driverkit.DeviceKey]string, error) {
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	out := map[driverkit.DeviceKey]string{}
	for _, gp := range g.gpus {
		reason, bad := g.health.unhealthy[gp.UUID]
		if !bad {
			continue
		}
		out[driverkit.DeviceKey{Pool: g.opts.Node, Device: mig.GPUDeviceName(gp.Index)}] = reason
		if gp.MIG {
			for _, p := range gp.Model.Partitions(gp.Index) {
				out[driverkit.DeviceKey{Pool: g.opts.Node, Device: p.DeviceName()}] = reason
			}
		}
	}
	return out, nil
}
