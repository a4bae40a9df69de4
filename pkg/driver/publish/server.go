package publish

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/validation"
	"github.com/dractl/dractl/pkg/internal/resourceapi"
)

// Server is what the kit knows of the kube-apiserver it publishes to,
// read once when it starts (ReadServer).
type Server struct {
	// Version is what the server reports (its gitVersion), for messages.
	Version string
	// Minor is the minor whose API the server serves
	// (validation.ServerKubeVersion).
	Minor validation.KubeVersion
	// Rules is the minor whose validation the kit publishes by: Minor when
	// dractl has its rules, the nearest supported minor otherwise (the
	// oldest for an older server, whose own refusals the ResourceSlice
	// controller then reports; the newest for a newer one).
	Rules validation.KubeVersion
	// schemas are the server's OpenAPI v3 schemas of resource.k8s.io/v1 by
	// name; a field of a published slice that they lack is refused, since
	// the server would drop it on write. Nil: every field is taken as
	// known (Build without a server).
	schemas map[string]*schemaNode
}

// sliceSchema is the OpenAPI v3 name of the v1 ResourceSlice.
const sliceSchema = "io.k8s.api.resource.v1.ResourceSlice"

// ReadServer reads the server's version and its schema of
// resource.k8s.io/v1. A server that does not serve ResourceSlices in
// resource.k8s.io/v1 (older than 1.34, or with the API turned off) is an
// error naming the API: nothing it stores could be published.
func ReadServer(d discovery.DiscoveryInterface) (*Server, error) {
	info, err := d.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the kube-apiserver's version: %w", err)
	}
	minor, err := validation.ServerKubeVersion(info)
	if err != nil {
		return nil, err
	}
	s := &Server{Version: info.GitVersion, Minor: minor, Rules: minor.Nearest()}
	if err := resourceapi.Require(d, "resourceslices"); err != nil {
		if resourceapi.IsNotServed(err) {
			return nil, fmt.Errorf("%w: a DRA driver publishes its devices there", err)
		}
		return nil, err
	}
	if s.schemas, err = resourceV1Schemas(d); err != nil {
		return nil, fmt.Errorf("kube-apiserver %s: %w", info.GitVersion, err)
	}
	if s.schemas[sliceSchema] == nil {
		return nil, fmt.Errorf("kube-apiserver %s: the OpenAPI v3 schema of resource.k8s.io/v1 has no %s", info.GitVersion, sliceSchema)
	}
	return s, nil
}

// Log says which rules the kit publishes by, and why when they are not
// the server's own.
func (s *Server) Log(logger klog.Logger) {
	if s.Rules == s.Minor {
		logger.Info("Publishing for kube-apiserver", "version", s.Version, "rules", s.Rules.String())
		return
	}
	logger.Info("No rules of this kube-apiserver's minor; publishing by the nearest minor's, and refusing fields the server does not know",
		"version", s.Version, "minor", s.Minor.String(), "rules", s.Rules.String(), "supported", validation.SupportedList())
}

// firstSeparateCounterSetsMinor is the first minor whose kube-apiserver
// takes counter sets in slices of their own (KEP-4815 "Limits"), as the
// kit publishes them; 1.34's wants them in the slice of the devices that
// consume them and refuses a device whose counter set is elsewhere.
const firstSeparateCounterSetsMinor = 35

// separateCounterSetsRefused reports whether the server refuses counter
// sets published apart from their devices.
func (s *Server) separateCounterSetsRefused() bool {
	return s != nil && s.Minor.Minor < firstSeparateCounterSetsMinor
}

// rules is the minor a build judges by: the server's, or the newest
// supported without one.
func (s *Server) rules() validation.KubeVersion {
	if s == nil {
		return validation.Newest()
	}
	return s.Rules
}

// unknownFields reports each field of a v1 ResourceSlice (as JSON) that
// the server's schema lacks.
func (s *Server) unknownFields(slice any) field.ErrorList {
	if s == nil || s.schemas == nil {
		return nil
	}
	data, err := json.Marshal(slice)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var errs field.ErrorList
	s.walk(v, s.schemas[sliceSchema], nil, func(p *field.Path) {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("kube-apiserver %s does not know this field of resource.k8s.io/v1 and would drop it", s.Version)))
	})
	return errs
}

// schemaNode is the part of an OpenAPI v3 schema that says which fields
// an object has: properties, array items, map values, and references.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	AllOf                []*schemaNode          `json:"allOf"`
	Properties           map[string]*schemaNode `json:"properties"`
	Items                *schemaNode            `json:"items"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
}

// resolve follows $ref and single-element allOf (how kube-apiserver's
// schemas point at a type) to the schema that describes the value.
func (s *Server) resolve(n *schemaNode) *schemaNode {
	for range 16 {
		switch {
		case n == nil:
			return nil
		case n.Ref != "":
			n = s.schemas[strings.TrimPrefix(n.Ref, "#/components/schemas/")]
		case len(n.AllOf) == 1 && n.Properties == nil:
			n = n.AllOf[0]
		default:
			return n
		}
	}
	return nil
}

func (s *Server) walk(v any, n *schemaNode, p *field.Path, unknown func(*field.Path)) {
	n = s.resolve(n)
	if n == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if n.Properties != nil {
			for _, k := range keys {
				child, ok := n.Properties[k]
				if !ok {
					unknown(childPath(p, k))
					continue
				}
				s.walk(v[k], child, childPath(p, k), unknown)
			}
			return
		}
		var values *schemaNode
		if len(n.AdditionalProperties) > 0 && json.Unmarshal(n.AdditionalProperties, &values) == nil && values != nil {
			for _, k := range keys {
				s.walk(v[k], values, p.Key(k), unknown)
			}
		}
	case []any:
		if n.Items != nil {
			for i, item := range v {
				s.walk(item, n.Items, p.Index(i), unknown)
			}
		}
	}
}

func childPath(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

// resourceV1Schemas reads the server's OpenAPI v3 document of
// resource.k8s.io/v1: the schemas of its types and of the types they
// refer to. A server without the document has none (nil, nil).
func resourceV1Schemas(d discovery.DiscoveryInterface) (map[string]*schemaNode, error) {
	paths, err := d.OpenAPIV3().Paths()
	if err != nil {
		return nil, fmt.Errorf("OpenAPI v3 discovery: %w", err)
	}
	gv, ok := paths["apis/resource.k8s.io/v1"]
	if !ok {
		return nil, nil
	}
	data, err := gv.Schema("application/json")
	if err != nil {
		return nil, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1: %w", err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]*schemaNode `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("OpenAPI v3 schema of resource.k8s.io/v1: %w", err)
	}
	return doc.Components.Schemas, nil
}
