package framework

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeAPIServer answers every request with a ConfigMap and records what
// reached it.
type fakeAPIServer struct {
	mu     sync.Mutex
	auth   []string
	writes int
}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	if isWrite(r.Method) {
		f.writes++
	}
	f.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"default","resourceVersion":"1"}}`)
}

func proxied(t *testing.T, rate float64) (*fakeAPIServer, *FaultProxy, kubernetes.Interface) {
	t.Helper()
	api := &fakeAPIServer{}
	backend := httptest.NewTLSServer(api)
	t.Cleanup(backend.Close)
	p, err := NewFaultProxy(backend.URL, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.SetRate(rate)
	cfg := &rest.Config{Host: p.URL, BearerToken: "secret", Timeout: 10 * time.Second, UserAgent: "tester/1", TLSClientConfig: rest.TLSClientConfig{CAData: p.CA}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return api, p, cs
}

// TestFaultProxyPassesThrough: without faults, reads and writes reach the
// API server with the client's credentials.
func TestFaultProxyPassesThrough(t *testing.T) {
	api, p, cs := proxied(t, 0)
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(api.auth) != 2 || api.auth[0] != "Bearer secret" || api.auth[1] != "Bearer secret" {
		t.Errorf("the API server saw Authorization %q, want the client's token twice", api.auth)
	}
	if injected, writes := p.Injected(); writes != 1 || len(injected) != 0 {
		t.Errorf("proxy counted %d writes and faults %v, want 1 write and none", writes, injected)
	}
}

// TestFaultProxyFailsWrites: at rate 1 every write fails with one of the
// faults, each kind as a client sees it; the writes of unknown outcome
// reached the API server, the others did not; reads are never failed.
func TestFaultProxyFailsWrites(t *testing.T) {
	api, p, cs := proxied(t, 1)
	ctx := context.Background()
	const n = 25
	for range n {
		_, err := cs.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}, metav1.UpdateOptions{})
		switch {
		case err == nil:
			// 429s are retried by client-go after Retry-After, and
			// the retry may pass or fail again: a fault each time.
		case apierrors.IsConflict(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err):
		case errors.Is(err, io.EOF), strings.Contains(err.Error(), "EOF"), strings.Contains(err.Error(), "connection reset"):
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Errorf("a read failed: %v", err)
	}
	injected, writes := p.Injected()
	total := 0
	for _, f := range Faults {
		if injected[f] == 0 {
			t.Errorf("no %s among %d faulted writes", f, writes)
		}
		total += injected[f]
	}
	if total != writes {
		t.Errorf("%d faults for %d writes at rate 1", total, writes)
	}
	if want := injected[FaultTimeoutAfterWrite] + injected[FaultDropAfterWrite]; api.writes != want {
		t.Errorf("the API server saw %d writes, want the %d of unknown outcome", api.writes, want)
	}
}

// TestFaultProxyPartition: a partitioned client's requests go unanswered;
// others pass.
func TestFaultProxyPartition(t *testing.T) {
	_, p, cs := proxied(t, 0)
	p.Partition("tester/", true)
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}); err == nil {
		t.Error("a partitioned client's read passed")
	}
	p.Partition("tester/", false)
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Errorf("after the partition healed: %v", err)
	}
}
