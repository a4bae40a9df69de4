// Package schedplugin is dractl's DRA plugin for kube-scheduler: it takes
// the place of the in-tree DynamicResources plugin and allocates devices
// through pkg/core/state instead of rebuilding an allocator per pod.
//
// The plugin depends only on the kube-scheduler framework interfaces
// (k8s.io/kube-scheduler/framework). Its phases follow the in-tree plugin:
//
//   - PreEnqueue: every claim the pod references exists, is not being
//     deleted and, when generated from a template, belongs to the pod.
//   - PreFilter: waits while Args.BindingsInFlight of the plugin's pods
//     are between Reserve and the end of PreBind's writes (see bindGate);
//     allocated claims may be used by the pod; pending claims
//     have known classes and no allocation in flight; one state.Cycle is
//     prepared for the pod's pending claims.
//   - Filter: allocated claims must be available on the node (node
//     selector, binding conditions that have not failed or timed out);
//     pending claims are allocated on the node by the Cycle, results kept
//     per node. A rejection names, per claim, what stopped it.
//   - PostFilter: deallocates an allocated claim that is unavailable
//     everywhere and reserved for nobody else; otherwise adds dractl's
//     summary over all nodes to the pod's unschedulable message.
//   - Score: the in-tree ranking of firstAvailable subrequests, or with
//     the BestFit strategy the node whose devices are fullest.
//   - Reserve/Unreserve: the chosen node's results become assumed
//     allocations, both in the State and in the framework's shared claim
//     tracker, which the in-tree plugin reads too, so both plugins can run
//     in one scheduler (in different profiles) without handing out a
//     device twice.
//   - PreBind: finalizer, status.allocation and status.reservedFor are
//     written; then the plugin waits for the devices' binding conditions
//     until they are met, one fails, or the binding timeout passes.
//
// Each phase is in a file named for it (prefilter.go, filter.go,
// postfilter.go, score.go, reserve.go, prebind.go; PreEnqueue and the
// queueing hints in claims.go); docs/architecture.md lists them all. The
// framework's methods are Plugin's; the state a phase keeps across cycles
// is a part of Plugin's with the methods that use it, in the phase's
// file: claimIndex (claims.go), binder (prebind.go), nodeResources
// (nodealloc.go), resultMaps (reuse.go). The reasons the plugin gives,
// the in-tree plugin's among them, are explain.go's reason table.
//
// The State is fed by the scheduler's informers (ResourceSlices,
// DeviceTaintRules when that feature is on, which the State applies to the
// slices as it does for the offline verbs, DeviceClasses, ResourceClaims)
// through pkg/core/state/informer. Allocations
// another plugin has made but not written yet are read from the shared
// claim tracker at the start of every cycle and assumed in the State until
// the API shows them. The State records who made each assumption and
// what became of this plugin's write of it (state.Assumption); the feed
// decides from that record when an assumption is wrong, and keeps only
// the claims the State refused.
//
// Queueing hints requeue pods on the scheduler's own view of claim, slice
// and class events, which can run ahead of the State. Pods whose devices
// the State could not find are therefore also kept on a waitlist and
// activated once the State has applied a change that may make room (a
// deallocation, a deleted claim, a new slice or class), so that a pod
// tried on a State that lagged behind its event is tried again. With
// kube-scheduler's SchedulerPreQueueingHints feature a claim event is put
// only to the pods that reference the claim, or to all when it freed
// devices. PreEnqueue does not gate a pod for a missing claim before the
// claim informer has listed, so that a scheduler starting with many
// pending pods does not ask each of them about every claim it lists.
package schedplugin
