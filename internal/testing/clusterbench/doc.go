// Package clusterbench measures the front half of dractl's pipeline at
// cluster scale: decoding, admission validation and pool assembly (with
// pool validation) for 1,000 DGX H100 nodes, about 150k devices. It holds
// only benchmarks and the manifest generator they share.
package clusterbench
