//go:build k8s138

package cel

import "github.com/dractl/dractl/pkg/internal/celgo/cel"

// listIncludes: 1.38's environment declares includes through Lists v1
// alone (k8s.io/apiserver v0.38 has no IncludesOption).
func listIncludes() []cel.EnvOption { return nil }
