package publish

import (
	"fmt"

	"k8s.io/client-go/discovery"
)

// resourceSliceSpecSchema is the OpenAPI v3 name of the v1 ResourceSlice
// spec, as kube-apiserver publishes it under /openapi/v3/apis/resource.k8s.io/v1.
const resourceSliceSpecSchema = "io.k8s.api.resource.v1.ResourceSliceSpec"

// ServerAcceptsMixins reports whether the API server's schema of
// resource.k8s.io/v1 ResourceSliceSpec has a "mixins" property
// (KEP-5234). A server that does not know the field would drop it, and
// with it every include: the devices would lose their attributes and
// counters silently. So publishing the compact form needs this to be
// true; anything else — no resource.k8s.io/v1, no OpenAPI v3, no field —
// means flat.
func ServerAcceptsMixins(d discovery.DiscoveryInterface) (bool, error) {
	schemas, err := resourceV1Schemas(d)
	if err != nil || schemas == nil {
		return false, err
	}
	spec, ok := schemas[resourceSliceSpecSchema]
	if !ok {
		return false, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1 has no %s", resourceSliceSpecSchema)
	}
	_, ok = spec.Properties["mixins"]
	return ok, nil
}
