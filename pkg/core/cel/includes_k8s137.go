//go:build !k8s138

package cel

import (
	"github.com/dractl/dractl/pkg/internal/celgo/cel"
	"k8s.io/apiserver/pkg/cel/library"
)

// listIncludes is what the device variable's environment adds for
// DRAListTypeAttributes. Upstream's 1.37 environment adds the includes
// function again although Lists v1 declares the same overload: it changes
// nothing but keeps the declarations identical. 1.38 dropped it
// (includes_k8s138.go).
func listIncludes() []cel.EnvOption { return []cel.EnvOption{library.IncludesOption()} }
