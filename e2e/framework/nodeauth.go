package framework

import (
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// nodeIdentities gives each kubelet the identity a real one has,
// system:node:<name> in the group system:nodes, so that kube-apiserver's
// Node authorizer and NodeRestriction admission hold it to its own node's
// pods, claims and slices. It is a TokenReview webhook that kube-apiserver
// asks about bearer tokens it does not know otherwise. A real kubelet
// proves its identity with a client certificate instead; a token is used
// here because components may reach kube-apiserver through a FaultProxy,
// which ends their TLS connection and forwards their requests with the
// Authorization header, not their certificate.
type nodeIdentities struct {
	srv *httptest.Server
	// kubeconfig is the webhook's configuration file for kube-apiserver.
	kubeconfig string

	mu    sync.Mutex
	nodes map[string]string // token -> node name
}

func newNodeIdentities(tb testing.TB) *nodeIdentities {
	tb.Helper()
	n := &nodeIdentities{nodes: map[string]string{}}
	n.srv = httptest.NewTLSServer(http.HandlerFunc(n.review))
	tb.Cleanup(n.srv.Close)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["webhook"] = &clientcmdapi.Cluster{
		Server:                   n.srv.URL,
		CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: n.srv.Certificate().Raw}),
	}
	kc.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "webhook", AuthInfo: "kube-apiserver"}
	kc.CurrentContext = "webhook"
	n.kubeconfig = filepath.Join(tb.TempDir(), "node-token-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, n.kubeconfig); err != nil {
		tb.Fatal(err)
	}
	return n
}

// flags are kube-apiserver's flags for the webhook.
func (n *nodeIdentities) flags() []string {
	return []string{
		"--authentication-token-webhook-config-file=" + n.kubeconfig,
		"--authentication-token-webhook-version=v1",
	}
}

// token returns a new token that authenticates as node's kubelet.
func (n *nodeIdentities) token(node string) string {
	t := rand.Text()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[t] = node
	return t
}

func (n *nodeIdentities) review(w http.ResponseWriter, r *http.Request) {
	var review authenticationv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	node, ok := n.nodes[review.Spec.Token]
	n.mu.Unlock()
	review.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if ok {
		review.Status.User = authenticationv1.UserInfo{Username: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	}
	review.Spec = authenticationv1.TokenReviewSpec{}
	review.APIVersion, review.Kind = authenticationv1.SchemeGroupVersion.String(), "TokenReview"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// NodeConfig returns the client configuration of node's kubelet: the
// node's own identity (system:node:<name>), which kube-apiserver's Node
// authorizer and NodeRestriction admission plugin confine to what a
// kubelet of that node may do, through the component proxy when one is
// set.
func (cp *ControlPlane) NodeConfig(node string) *rest.Config {
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = cp.nodeIDs.token(node)
	cfg.UserAgent = "kubelet/" + node
	return cp.Via(cfg)
}
