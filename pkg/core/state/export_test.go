package state

import "github.com/dractl/dractl/pkg/core/pool"

// DropPoolsMap empties the snapshot's pools map, which only lookups by
// pool ID (and snapshots whose pools changed twice since) read.
func DropPoolsMap(s *Snapshot) { s.pools = cowView[pool.ID, *poolEntry]{} }
