// Package simulate runs streams of pods through a cluster the way a
// scheduler places them, one placement strategy at a time, and reports
// what a capacity planner asks: how many pods fit, when and why the first
// one did not, how much of every counter is used and how much is stranded
// (free, but consumed by no device that can still be allocated) over
// time, and why pods failed.
//
// Every placement goes through pkg/state: a snapshot per pod, a cycle per
// node, the chosen allocation fed back as a claim, a departure as a claim
// deleted. Nodes that share no pool cannot affect each other, so each
// group of nodes that do (an island) has a State of its own: a placement
// snapshots one node's pools, not the whole cluster's (see island).
//
// Reports come as text, JSON and a self-contained HTML page whose pictures
// are pkg/render's, the same as `dractl describe` draws.
package simulate
