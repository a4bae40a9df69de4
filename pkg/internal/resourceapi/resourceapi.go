// Package resourceapi says where a kube-apiserver serves the DRA API:
// whether it serves a resource in resource.k8s.io/v1, which dractl reads
// and writes, and which other versions of the group serve it (the
// DeviceTaintRules of servers older than 1.37).
package resourceapi

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// Group is the API group of DRA.
const Group = "resource.k8s.io"

// FirstV1Minor is the first Kubernetes minor whose kube-apiserver serves
// resource.k8s.io/v1.
const FirstV1Minor = 34

// NotServedError is a server that does not serve a resource in
// resource.k8s.io/v1: one older than 1.34, or one with the API (or the
// resource's feature) turned off.
type NotServedError struct {
	// Server is the version the server reports.
	Server string
	// Minor is the server's minor, 0 when it does not say.
	Minor int
	// Resource is the resource's plural name (resourceslices).
	Resource string
}

func (e *NotServedError) Error() string {
	if e.Minor >= FirstV1Minor {
		return fmt.Sprintf("kube-apiserver %s does not serve %s in %s/v1: the API is turned off there (--runtime-config), which Kubernetes 1.%d and newer serve by default", e.Server, e.Resource, Group, FirstV1Minor)
	}
	return fmt.Sprintf("kube-apiserver %s does not serve %s in %s/v1 (Kubernetes 1.%d and newer do)", e.Server, e.Resource, Group, FirstV1Minor)
}

// Require returns a *NotServedError when the server does not serve
// resource in resource.k8s.io/v1, nil when it does, and the discovery
// error when it cannot tell.
func Require(d discovery.DiscoveryInterface, resource string) error {
	served, err := ServedIn(d, "v1", resource)
	if err != nil || served {
		return err
	}
	info, err := d.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the kube-apiserver's version: %w", err)
	}
	minor, _ := strconv.Atoi(strings.TrimSuffix(info.Minor, "+"))
	return &NotServedError{Server: info.GitVersion, Minor: minor, Resource: resource}
}

// ServedIn reports whether the server serves resource in version of
// resource.k8s.io.
func ServedIn(d discovery.DiscoveryInterface, version, resource string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(Group + "/" + version)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s/%s: %w", Group, version, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// IsNotServed reports whether err is, or wraps, a *NotServedError.
func IsNotServed(err error) bool {
	var ns *NotServedError
	return errors.As(err, &ns)
}
