package delegatedauth_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dractl/dractl/pkg/ops/delegatedauth"
)

// fakeAPIServer answers what delegated authentication and authorization
// ask kube-apiserver: the extension-apiserver-authentication ConfigMap,
// TokenReviews (token "scraper" and "stranger" are users of those names)
// and SubjectAccessReviews (only "scraper" may get /metrics). It counts
// the reviews.
type fakeAPIServer struct {
	tokenReviews, accessReviews atomic.Int32
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication":
		_ = json.NewEncoder(w).Encode(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"}})
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews":
		f.tokenReviews.Add(1)
		var tr authenticationv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		if tr.Spec.Token == "scraper" || tr.Spec.Token == "stranger" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token}}
		}
		_ = json.NewEncoder(w).Encode(&tr)
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.accessReviews.Add(1)
		var sar authorizationv1.SubjectAccessReview
		_ = json.NewDecoder(r.Body).Decode(&sar)
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "scraper" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		_ = json.NewEncoder(w).Encode(&sar)
	default:
		http.NotFound(w, r)
	}
}

// TestServe: behind Serve, /metrics answers only a request whose token
// kube-apiserver authenticates and whose user it authorizes for "get
// /metrics"; the probes answer anyone; every answer comes over TLS.
func TestServe(t *testing.T) {
	fake := &fakeAPIServer{}
	api := httptest.NewTLSServer(fake)
	defer api.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fake"] = &clientcmdapi.Cluster{Server: api.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["fake"] = &clientcmdapi.AuthInfo{Token: "monitor"}
	kc.Contexts["fake"] = &clientcmdapi.Context{Cluster: "fake", AuthInfo: "fake"}
	kc.CurrentContext = "fake"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "dractl_pools 1") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := delegatedauth.NewOptions()
	o.SetKubeconfig(kubeconfig)
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := o.Serve(ctx, ln, mux)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() { cancel(); <-stopped }()

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+ln.Addr().String()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusForbidden}, // system:anonymous
		{"/metrics", "forged", http.StatusUnauthorized},
		{"/metrics", "stranger", http.StatusForbidden},
		{"/metrics", "scraper", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.want {
			t.Errorf("GET %s with token %q: %d %s, want %d", tc.path, tc.token, code, body, tc.want)
		}
		if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "dractl_pools") {
			t.Errorf("GET /metrics: %s", body)
		}
	}
	if fake.tokenReviews.Load() == 0 || fake.accessReviews.Load() == 0 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews: the decisions were not kube-apiserver's", fake.tokenReviews.Load(), fake.accessReviews.Load())
	}
	if _, err := os.Stat("apiserver.local.config"); err == nil {
		t.Error("the serving certificate was written to the working directory")
	}
}
