// Package election is the one leader election of dractl's replicated
// controllers (the monitor, the control-plane pool publisher): the Lease
// and its defaults, a replica's identity, and competing again after a
// term ends.
package election

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// Identity is a replica's identity in a Lease when none is configured:
// the host name (a pod's own in a cluster) and a random suffix, as
// kube-controller-manager and kube-scheduler make theirs. The host name
// alone is not unique: pods on the host network share their node's, and
// two replicas with one identity both renew the Lease and both lead.
func Identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}
