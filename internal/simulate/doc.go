// Package simulate runs streams of pods through a cluster the way
// kube-scheduler places them, one placement strategy at a time, and
// reports what a capacity planner asks: how many pods are placed on
// arrival, how long the others wait in the scheduling queue (queue.go:
// kube-scheduler's active, backoff and unschedulable queues with their
// default timings), how much of every counter is used and how much is
// stranded (free, but consumed by no device that can still be allocated)
// over time, what an offline repack would let in, and why pods waited.
// Over whole runs it answers how many nodes of a template a workload needs
// for a bound on its p99 wait (NodesNeeded), and which nodes of a cluster
// could go with their claims placed elsewhere (ScaleDown).
//
// Every placement goes through pkg/core/state: a snapshot per pod, a cycle per
// node, the chosen allocation fed back as a claim, a departure as a claim
// deleted. Nodes that share no pool cannot affect each other, so each
// group of nodes that do (an island) has a State of its own: a placement
// snapshots one node's pools, not the whole cluster's (see island).
//
// Reports come as text, JSON and a self-contained HTML page whose pictures
// are pkg/ops/render's, the same as `dractl describe` draws.
package simulate
