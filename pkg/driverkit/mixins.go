package driverkit

import (
	"encoding/json"
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
	paths, err := d.OpenAPIV3().Paths()
	if err != nil {
		return false, fmt.Errorf("OpenAPI v3 discovery: %w", err)
	}
	gv, ok := paths["apis/resource.k8s.io/v1"]
	if !ok {
		return false, nil
	}
	data, err := gv.Schema("application/json")
	if err != nil {
		return false, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1: %w", err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return false, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1: %w", err)
	}
	spec, ok := doc.Components.Schemas[resourceSliceSpecSchema]
	if !ok {
		return false, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1 has no %s", resourceSliceSpecSchema)
	}
	_, ok = spec.Properties["mixins"]
	return ok, nil
}
