// Package delegatedauth serves an HTTP handler the way Kubernetes
// components serve /metrics: over TLS, with every request authenticated
// and authorized by kube-apiserver (delegated authentication and
// authorization, k8s.io/apiserver's DelegatingAuthenticationOptions and
// DelegatingAuthorizationOptions). A bearer token is checked with a
// TokenReview, a client certificate against the cluster's client CA (the
// kube-system/extension-apiserver-authentication ConfigMap), and the
// request, as a non-resource URL such as "get /metrics", with a
// SubjectAccessReview. Probe paths stay open: kubelets probe without
// credentials.
//
// The serving identity needs what kube-scheduler's needs for the same:
// the system:auth-delegator ClusterRole (create TokenReviews and
// SubjectAccessReviews) and the extension-apiserver-authentication-reader
// Role in kube-system.
package delegatedauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/scheme"
)

// Options of a delegated-auth endpoint. The zero value is not usable:
// start from NewOptions.
type Options struct {
	Serving        *options.SecureServingOptions
	Authentication *options.DelegatingAuthenticationOptions
	Authorization  *options.DelegatingAuthorizationOptions
}

// NewOptions returns kube components' defaults: anonymous requests are
// authenticated as system:anonymous (and then refused by authorization,
// 403) and /healthz, /readyz and /livez need no authorization.
func NewOptions() *Options {
	o := &Options{
		Serving:        options.NewSecureServingOptions(),
		Authentication: options.NewDelegatingAuthenticationOptions(),
		Authorization:  options.NewDelegatingAuthorizationOptions(),
	}
	// Without a certificate, one is generated in memory: the default
	// directory would write it to the working directory, which a
	// container with a read-only root file system does not have.
	o.Serving.ServerCert.CertDirectory = ""
	return o
}

// AddFlags adds the flags an operator needs beside the bind address: a
// serving certificate (a self-signed one is made in memory without) and
// the kubeconfig of the reviews (the component's own by default).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Serving.ServerCert.CertKey.CertFile, "tls-cert-file", "",
		"x509 certificate of the metrics endpoint (a self-signed one is generated in memory when empty)")
	fs.StringVar(&o.Serving.ServerCert.CertKey.KeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
}

// SetKubeconfig makes the reviews go through the kubeconfig file at path;
// without it they use the in-cluster configuration.
func (o *Options) SetKubeconfig(path string) {
	o.Authentication.RemoteKubeConfigFile = path
	o.Authorization.RemoteKubeConfigFile = path
}

// Serve serves handler on ln until ctx ends, behind TLS, authentication
// and authorization; it returns once the server runs, or the error that
// kept it from starting (no certificate, kube-apiserver unreachable for
// the client CA, ...). The returned channel closes when the server has
// stopped.
func (o *Options) Serve(ctx context.Context, ln net.Listener, handler http.Handler) (<-chan struct{}, error) {
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("listener on %s: a TCP address is needed", ln.Addr())
	}
	o.Serving.Listener, o.Serving.BindAddress, o.Serving.BindPort = ln, tcp.IP, tcp.Port
	if err := o.Serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, nil); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if errs := append(o.Serving.Validate(), append(o.Authentication.Validate(), o.Authorization.Validate()...)...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var serving *server.SecureServingInfo
	if err := o.Serving.ApplyTo(&serving); err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	var authn server.AuthenticationInfo
	if err := o.Authentication.ApplyTo(&authn, serving, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	var authz server.AuthorizationInfo
	if err := o.Authorization.ApplyTo(&authz); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	// kube-scheduler's chain, innermost first: authorization needs the
	// user that authentication found and the verb and path that request
	// info parsed.
	resolver := &apirequest.RequestInfoFactory{}
	h := genericapifilters.WithAuthorization(handler, authz.Authorizer, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn.Authenticator, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, resolver)
	h = genericapifilters.WithCacheControl(h)
	h = genericfilters.WithPanicRecovery(h, resolver)
	stopped, _, err := serving.Serve(h, 5*time.Second, ctx.Done())
	if err != nil {
		return nil, err
	}
	return stopped, nil
}
