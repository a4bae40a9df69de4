package workload

import (
	"reflect"

	"github.com/dractl/dractl/pkg/decode"
)

// Workloads are read by pkg/decode as strictly as the Kubernetes kinds,
// with their defaults applied, wherever this package is linked in.
func init() {
	decode.Register(decode.Kind{
		APIVersion: APIVersion,
		Kind:       Kind,
		Namespaced: true,
		Type:       reflect.TypeFor[Workload](),
		Default:    func(obj any) { SetDefaults(obj.(*Workload)) },
	})
}
