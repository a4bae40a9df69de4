package cel

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

func str(s string) api.DeviceAttribute   { return api.DeviceAttribute{StringValue: ptr.To(s)} }
func num(i int64) api.DeviceAttribute    { return api.DeviceAttribute{IntValue: ptr.To(i)} }
func boolean(b bool) api.DeviceAttribute { return api.DeviceAttribute{BoolValue: ptr.To(b)} }
func ver(v string) api.DeviceAttribute   { return api.DeviceAttribute{VersionValue: ptr.To(v)} }
func quant(s string) api.DeviceCapacity  { return api.DeviceCapacity{Value: resource.MustParse(s)} }

type attrs = map[api.QualifiedName]api.DeviceAttribute
type caps = map[api.QualifiedName]api.DeviceCapacity

// viewsOf resolves the includes of every device of spec and returns the
// views by device name; a fixture with a bad include is a test bug.
func viewsOf(t testing.TB, spec *api.ResourceSliceSpec) map[string]api.DeviceView {
	t.Helper()
	ix := api.NewMixinIndex(spec)
	out := map[string]api.DeviceView{}
	for i := range spec.Devices {
		v, err := ix.Device(&spec.Devices[i])
		if err != nil {
			t.Fatalf("fixture device %s: %v", spec.Devices[i].Name, err)
		}
		out[spec.Devices[i].Name] = v
	}
	return out
}
