//go:build cgo

package main

import (
	"context"

	"k8s.io/client-go/kubernetes"

	"github.com/dractl/dractl/pkg/driver/nvmlgpu"
)

func runNVML(ctx context.Context, o Options, client kubernetes.Interface) error {
	return nvmlgpu.Run(ctx, nvmlgpu.Config{
		DriverName: o.DriverName, NodeName: o.NodeName, StateDir: o.StateDir, CDIDir: o.CDIDir,
		RegistrarDir: o.RegistrarDir, PluginDir: o.PluginDir, CompactIfAccepted: o.CompactIfAccepted,
		Failpoint: o.Failpoint, MigMinors: o.MigMinors, DevRoot: o.DevRoot, Mock: o.NVMLMock, Kit: o.Kit,
	}, client)
}
