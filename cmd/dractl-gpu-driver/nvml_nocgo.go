//go:build !cgo

package main

import (
	"context"
	"errors"

	"k8s.io/client-go/kubernetes"
)

// go-nvml loads libnvidia-ml.so through cgo; a binary built without cgo
// has the mock backend only.
func runNVML(context.Context, Options, kubernetes.Interface) error {
	return errors.New("--backend=nvml needs a build with cgo (CGO_ENABLED=1)")
}
