package driverkit_test

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/gpu"
	"github.com/dractl/dractl/pkg/driver/mig"
)

const (
	driver = gpu.DriverName
	node   = drivertest.MockNodeName
)

// env is a node of the mock GPU backend, whose kit the tests' drivers
// run over the same directories.
type env = drivertest.MockNode

func newEnv(t *testing.T) *env { return drivertest.NewMockNode(t) }

// claim is an allocated claim of the given MIG devices of this node.
func claim(name string, devices ...string) *resourcev1.ResourceClaim {
	return drivertest.Claim(driver, node, name, devices...)
}

func migDev(gpu int, profile string, start int) string { return mig.MIGDeviceName(gpu, profile, start) }
