// This file is dropped into a temporary copy of kube-scheduler's
// scheduler_perf package (package benchmark) by scheduler/schedperf; it is
// not compiled as part of the dractl repository. RunBenchmarkPerfScheduling
// takes an out-of-tree plugin registry, RunIntegrationPerfScheduling only
// options, and none of those sets the registry.
package benchmark

import frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

// WithOutOfTreePluginRegistry makes the scheduler of every workload know the
// plugins of registry besides the in-tree ones.
func WithOutOfTreePluginRegistry(registry frameworkruntime.Registry) SchedulerPerfOption {
	return func(o *schedulerPerfOptions) {
		o.outOfTreePluginRegistry = registry
	}
}
