package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/ops/delegatedauth"
)

// serveMetrics serves the driver's /metrics and /healthz on
// --metrics-bind-address until ctx ends, over HTTPS behind delegated
// authentication and authorization with --metrics-auth (as the monitor
// serves its own), and returns once it serves. The returned function
// waits for the server to stop after ctx has ended.
func serveMetrics(ctx context.Context, o Options, m *driverkit.Metrics) (func(), error) {
	ln, err := net.Listen("tcp", o.MetricsBindAddress)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	logger := klog.FromContext(ctx)
	if !o.MetricsAuth {
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = srv.Serve(ln)
		}()
		go func() {
			<-ctx.Done()
			srv.Close()
		}()
		logger.Info("Serving /metrics and /healthz", "address", ln.Addr().String())
		return func() { <-done }, nil
	}
	auth := delegatedauth.NewOptions()
	auth.Serving.ServerCert.CertKey.CertFile, auth.Serving.ServerCert.CertKey.KeyFile = o.TLSCertFile, o.TLSKeyFile
	if o.Kubeconfig != "" {
		auth.SetKubeconfig(o.Kubeconfig)
	}
	stopped, err := auth.Serve(ctx, ln, mux)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("--metrics-auth: %w", err)
	}
	logger.Info("Serving /metrics (authenticated and authorized) and /healthz over HTTPS", "address", ln.Addr().String())
	return func() { <-stopped }, nil
}
