// Package render draws the occupancy of resource pools from a state
// snapshot: every shared counter set as KEP-4815 draws a MIG-capable GPU
// ("Dynamic allocation of Multi-Instance GPUs"), as terminal text (with
// colour on a terminal) or as SVG, and the charts of simulation reports.
//
// Grids is the one layout; Text and SVG only draw it, so a terminal and a
// report always show the same picture. The package reads
// state.PoolUsage and nothing else: any source of snapshots (files, a live
// cluster, a simulator) gets the same pictures.
package render
