package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldsel "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/dractl/dractl/pkg/internal/resourceapi"
)

// DefaultPageSize is how many objects one list request asks for. A
// ResourceSlice can be large (up to 128 devices), so this is smaller than
// kubectl's 500: a page of DGX H100 slices is then a few megabytes.
const DefaultPageSize = 100

// DefaultTimeout bounds each request when the caller set none, so that an
// API server that accepts connections but never answers does not hang a
// command.
const DefaultTimeout = 60 * time.Second

// NoTimeout, as a rest.Config's Timeout, asks NewClient for no timeout at
// all, where zero asks for DefaultTimeout.
const NoTimeout time.Duration = -1

// Client reads DRA objects from one cluster.
type Client struct {
	cs   kubernetes.Interface
	host string
	// PageSize is the limit of each list request; 0 means DefaultPageSize,
	// a negative value one unpaged request per list.
	PageSize int64
}

// Client-side rate limits when the configuration sets none: kubectl's for
// discovery. client-go's defaults (5 requests a second after a burst of
// 10) would make the 50 pages of a thousand-node cluster's slices wait
// some 8 s in the client. A Client sends one request at a time (a page
// needs the previous one's continue token), and the API server's
// priority and fairness protects it from many clients.
const (
	DefaultQPS   = 50
	DefaultBurst = 300
)

// NewClient returns a Client for cfg. It asks for protobuf, which the API
// server encodes and client-go decodes several times faster than JSON, and
// sets DefaultTimeout (unless cfg.Timeout is NoTimeout), DefaultQPS and
// DefaultBurst where cfg has none.
func NewClient(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS == 0 && cfg.Burst == 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	case cfg.Timeout < 0:
		cfg.Timeout = 0
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "dractl"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{cs: cs, host: cfg.Host}, nil
}

// ServerVersion is what the kube-apiserver reports at /version; the live
// verbs judge objects by its minor (validation.ServerKubeVersion).
func (c *Client) ServerVersion() (*version.Info, error) {
	info, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("read the server version from %s: %w", c.host, err)
	}
	return info, nil
}

// NewClientFor wraps an existing clientset (a fake one in unit tests of
// error paths).
func NewClientFor(cs kubernetes.Interface, host string) *Client {
	return &Client{cs: cs, host: host}
}

// Clientset is the underlying clientset.
func (c *Client) Clientset() kubernetes.Interface { return c.cs }

// Error is a request that failed: which verb on which resource, and why.
type Error struct {
	Verb     string // list, get
	Resource string // resourceslices.resource.k8s.io
	Name     string // for get
	Host     string
	Err      error
}

func (e *Error) Error() string {
	what := e.Resource
	if e.Name != "" {
		what += " " + e.Name
	}
	if Unreachable(e) {
		return fmt.Sprintf("cannot %s %s: the API server at %s cannot be reached: %v", e.Verb, what, e.Host, rootCause(e.Err))
	}
	return fmt.Sprintf("cannot %s %s: %v", e.Verb, what, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Unreachable reports whether err means the API server did not answer:
// refused or reset connections, DNS failures, timeouts.
func Unreachable(err error) bool {
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ue):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// Forbidden reports whether the API server refused the request for lack of
// permission.
func Forbidden(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

// NotFound reports whether a get named an object that does not exist.
func NotFound(err error) bool { return apierrors.IsNotFound(err) }

func rootCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *Client) fail(verb, resource, name string, err error) error {
	if err == nil {
		return nil
	}
	// A list of a DRA resource that is not found: the server may not serve
	// resource.k8s.io/v1 at all (older than 1.34), which discovery tells.
	if plural, group, _ := strings.Cut(resource, "."); verb == "list" && group == resourceapi.Group && apierrors.IsNotFound(err) {
		if nerr := resourceapi.Require(c.cs.Discovery(), plural); resourceapi.IsNotServed(nerr) {
			err = nerr
		}
	}
	return &Error{Verb: verb, Resource: resource, Name: name, Host: c.host, Err: err}
}

func (c *Client) pageSize() int64 {
	switch {
	case c.PageSize > 0:
		return c.PageSize
	case c.PageSize < 0:
		return 0
	}
	return DefaultPageSize
}

// list lists a resource page by page.
func list[T any](ctx context.Context, c *Client, resource, fieldSelector string,
	page func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]*T, error) {
	var out []*T
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) { return page(ctx, o) }))
	p.PageSize = c.pageSize()
	err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: fieldSelector}, func(obj runtime.Object) error {
		item, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("unexpected %T in a list of %s", obj, resource)
		}
		out = append(out, item)
		return nil
	})
	return out, c.fail("list", resource, "", err)
}

// Resource names, as the API server and RBAC spell them.
const (
	ResourceSlices         = "resourceslices.resource.k8s.io"
	DeviceClasses          = "deviceclasses.resource.k8s.io"
	ResourceClaims         = "resourceclaims.resource.k8s.io"
	ResourceClaimTemplates = "resourceclaimtemplates.resource.k8s.io"
	DeviceTaintRules       = "devicetaintrules.resource.k8s.io"
	Nodes                  = "nodes"
	Pods                   = "pods"
)

// SliceFields say how much of each ResourceSlice a list decodes.
type SliceFields int

const (
	// AllFields: the slices as the API server stores them.
	AllFields SliceFields = iota
	// PoolFields: what pool checks and usage read; device attributes and
	// managedFields are left out (TrimToPool), from the protobuf bytes
	// before they are decoded.
	PoolFields
)

// Slices lists ResourceSlices; fieldSelector may select by spec.nodeName,
// spec.driver or spec.pool.name.
func (c *Client) Slices(ctx context.Context, fieldSelector string) ([]*resourcev1.ResourceSlice, error) {
	return c.SlicesWith(ctx, fieldSelector, AllFields)
}

// SlicesWith lists ResourceSlices as Slices does, decoding only the
// fields asked for. A server older than 1.37 has no spec.pool.name field
// label and refuses a selector with it: the pool is then selected here,
// from what the rest of the selector lists.
func (c *Client) SlicesWith(ctx context.Context, fieldSelector string, fields SliceFields) ([]*resourcev1.ResourceSlice, error) {
	out, err := c.slicesWith(ctx, fieldSelector, fields)
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported") {
		return out, err
	}
	sel, perr := fieldsel.ParseSelector(fieldSelector)
	if perr != nil {
		return out, err
	}
	pool, byPool := sel.RequiresExactMatch(resourcev1.ResourceSliceSelectorPoolName)
	if !byPool {
		return out, err
	}
	rest, _ := sel.Transform(func(f, v string) (string, string, error) {
		if f == resourcev1.ResourceSliceSelectorPoolName {
			return "", "", nil
		}
		return f, v, nil
	})
	all, err := c.slicesWith(ctx, rest.String(), fields)
	if err != nil {
		return nil, err
	}
	out = all[:0]
	for _, s := range all {
		if s.Spec.Pool.Name == pool {
			out = append(out, s)
		}
	}
	return out, nil
}

func (c *Client) slicesWith(ctx context.Context, fieldSelector string, fields SliceFields) ([]*resourcev1.ResourceSlice, error) {
	out, err := c.slicesParallel(ctx, fieldSelector, fields)
	if !errors.Is(err, errNotProtobuf) && !expired(err) {
		return out, c.fail("list", ResourceSlices, "", err)
	}
	api := c.cs.ResourceV1().ResourceSlices()
	out, err = list[resourcev1.ResourceSlice](ctx, c, ResourceSlices, fieldSelector,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
	if fields == PoolFields {
		for _, s := range out {
			TrimToPool(s)
		}
	}
	return out, err
}

// Classes lists DeviceClasses.
func (c *Client) Classes(ctx context.Context) ([]*resourcev1.DeviceClass, error) {
	api := c.cs.ResourceV1().DeviceClasses()
	return list[resourcev1.DeviceClass](ctx, c, DeviceClasses, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
}

// Claims lists the ResourceClaims of a namespace ("" for all).
func (c *Client) Claims(ctx context.Context, namespace string) ([]*resourcev1.ResourceClaim, error) {
	api := c.cs.ResourceV1().ResourceClaims(namespace)
	return list[resourcev1.ResourceClaim](ctx, c, ResourceClaims, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
}

// ClaimTemplates lists the ResourceClaimTemplates of a namespace ("" for
// all).
func (c *Client) ClaimTemplates(ctx context.Context, namespace string) ([]*resourcev1.ResourceClaimTemplate, error) {
	api := c.cs.ResourceV1().ResourceClaimTemplates(namespace)
	return list[resourcev1.ResourceClaimTemplate](ctx, c, ResourceClaimTemplates, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
}

// TaintRules lists DeviceTaintRules. A cluster that does not serve them
// in resource.k8s.io/v1 has none there: one without the feature has none
// at all, but a server older than 1.37 serves them in an alpha or beta
// version of the group only, which dractl does not read, and when it
// holds some, reading on would show their devices untainted, so that is
// an error naming the version (taintRulesElsewhere).
func (c *Client) TaintRules(ctx context.Context) ([]*resourcev1.DeviceTaintRule, error) {
	api := c.cs.ResourceV1().DeviceTaintRules()
	out, err := list[resourcev1.DeviceTaintRule](ctx, c, DeviceTaintRules, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
	if resourceapi.IsNotServed(err) {
		return nil, c.taintRulesElsewhere(ctx)
	}
	return out, err
}

// taintRulesElsewhere fails when the server holds DeviceTaintRules in a
// version of resource.k8s.io other than v1.
func (c *Client) taintRulesElsewhere(ctx context.Context) error {
	lists := []struct {
		version string
		list    func(context.Context, metav1.ListOptions) (int, error)
	}{
		{"v1beta2", func(ctx context.Context, o metav1.ListOptions) (int, error) {
			l, err := c.cs.ResourceV1beta2().DeviceTaintRules().List(ctx, o)
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
		{"v1alpha3", func(ctx context.Context, o metav1.ListOptions) (int, error) {
			l, err := c.cs.ResourceV1alpha3().DeviceTaintRules().List(ctx, o)
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
	}
	for _, l := range lists {
		served, err := resourceapi.ServedIn(c.cs.Discovery(), l.version, "devicetaintrules")
		if err != nil {
			return c.fail("list", DeviceTaintRules, "", err)
		}
		if !served {
			continue
		}
		n, err := l.list(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return c.fail("list", DeviceTaintRules, "", fmt.Errorf("in %s/%s: %w", resourceapi.Group, l.version, err))
		}
		if n > 0 {
			server := "the server"
			if info, err := c.cs.Discovery().ServerVersion(); err == nil {
				server = "kube-apiserver " + info.GitVersion
			}
			return c.fail("list", DeviceTaintRules, "", fmt.Errorf(
				"%s holds DeviceTaintRules in %s/%s, which dractl does not read (it reads %s/v1, where Kubernetes 1.37 and newer serve them): the devices they taint would be shown untainted",
				server, resourceapi.Group, l.version, resourceapi.Group))
		}
	}
	return nil
}

// Nodes lists Nodes.
func (c *Client) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	api := c.cs.CoreV1().Nodes()
	return list[corev1.Node](ctx, c, Nodes, "",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
}

// PendingPods lists the pods of a namespace ("" for all) that are not
// bound to a node yet.
func (c *Client) PendingPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	api := c.cs.CoreV1().Pods(namespace)
	return list[corev1.Pod](ctx, c, Pods, "spec.nodeName=",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) })
}

// Node gets one Node.
func (c *Client) Node(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	return n, c.fail("get", Nodes, name, err)
}

// Pod gets one Pod.
func (c *Client) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p, err := c.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	return p, c.fail("get", Pods, namespace+"/"+name, err)
}

// ClaimTemplate gets one ResourceClaimTemplate.
func (c *Client) ClaimTemplate(ctx context.Context, namespace, name string) (*resourcev1.ResourceClaimTemplate, error) {
	t, err := c.cs.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, name, metav1.GetOptions{})
	return t, c.fail("get", ResourceClaimTemplates, namespace+"/"+name, err)
}
