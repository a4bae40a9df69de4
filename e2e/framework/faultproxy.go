package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// Fault is what FaultProxy does to a write instead of passing it through.
type Fault string

// The faults of a write. The last two are the writes of unknown outcome:
// kube-apiserver has done (or will do) the write, and the client cannot
// tell.
const (
	// FaultConflict answers 409 Conflict without forwarding.
	FaultConflict Fault = "conflict"
	// FaultTooManyRequests answers 429 with Retry-After: 1 without
	// forwarding, as API priority and fairness does under load.
	FaultTooManyRequests Fault = "too-many-requests"
	// FaultTimeout answers 504 Timeout without forwarding.
	FaultTimeout Fault = "timeout"
	// FaultTimeoutAfterWrite forwards the write, discards the answer and
	// answers 504 Timeout, as kube-apiserver does when etcd is slow to
	// confirm a write it then makes.
	FaultTimeoutAfterWrite Fault = "timeout-after-write"
	// FaultDropAfterWrite forwards the write and closes the client's
	// connection without an answer.
	FaultDropAfterWrite Fault = "dropped-after-write"
)

// Faults lists every Fault, in the order FaultProxy draws them.
var Faults = []Fault{FaultConflict, FaultTooManyRequests, FaultTimeout, FaultTimeoutAfterWrite, FaultDropAfterWrite}

// FaultProxy is a reverse proxy in front of kube-apiserver
// through which components talk (ControlPlane.RouteComponents), so that a
// test can fail their writes at random, cut one of them off the network
// (Partition) and restart kube-apiserver behind them (its address
// changes; the proxy's does not). Reads and watches pass through
// untouched; faults are drawn for writes only, because writes are where
// an unknown outcome can cost a double allocation.
type FaultProxy struct {
	// URL is where it serves (https, loopback) and CA the certificate
	// (PEM) clients trust it with. It serves TLS because clients read no
	// credentials from a kubeconfig for a plain-HTTP server.
	URL string
	CA  []byte

	backend atomic.Pointer[url.URL]
	rp      *httputil.ReverseProxy
	tr      *http.Transport
	srv     *http.Server

	mu          sync.Mutex
	rng         *rand.Rand
	rate        float64
	partitioned []string // user agent prefixes
	conns       map[net.Conn]string
	injected    map[Fault]int
	writes      int
}

// NewFaultProxy serves on a loopback port in front of backend (an https
// URL of kube-apiserver); faults are drawn from seed.
func NewFaultProxy(backend string, seed uint64) (*FaultProxy, error) {
	p := &FaultProxy{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns:    map[net.Conn]string{},
		injected: map[Fault]int{},
	}
	if err := p.SetBackend(backend); err != nil {
		return nil, err
	}
	// The proxy is test plumbing on loopback in front of a server whose
	// certificate changes on every restart; the components' trust in
	// kube-apiserver is not what a soak tests.
	p.tr = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 64}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(p.backend.Load())
			r.Out.Host = r.Out.URL.Host
		},
		Transport:     p.tr,
		FlushInterval: -1, // watches stream
		ErrorLog:      quiet,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.URL, p.CA = "https://"+ln.Addr().String(), certPEM
	p.srv = &http.Server{
		// HTTP/1.1 only: dropping a connection takes hijacking it.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		Handler:      http.HandlerFunc(p.serve),
		ErrorLog:     quiet,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
			}
		},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() {
		_ = p.srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}))
	}()
	return p, nil
}

type connKey struct{}

// quiet drops the proxy's own logging: the connections it breaks on
// purpose are not news.
var quiet = log.New(io.Discard, "", 0)

// SetBackend points the proxy at kube-apiserver's current address.
func (p *FaultProxy) SetBackend(backend string) error {
	u, err := url.Parse(backend)
	if err != nil {
		return err
	}
	p.backend.Store(u)
	return nil
}

// SetRate sets the probability with which a write fails, one of Faults
// drawn evenly.
func (p *FaultProxy) SetRate(rate float64) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

// Partition cuts off (on) or reconnects clients whose user agent starts
// with prefix: their open connections are closed and new requests are
// dropped unanswered, as if their host had gone. A process killed with
// its lease held is modelled this way: it cannot release the lease.
func (p *FaultProxy) Partition(prefix string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = slices.DeleteFunc(p.partitioned, func(s string) bool { return s == prefix })
	if !on {
		return
	}
	p.partitioned = append(p.partitioned, prefix)
	for c, ua := range p.conns {
		if strings.HasPrefix(ua, prefix) {
			c.Close()
		}
	}
}

// Injected returns how many writes got each fault, and how many writes
// the proxy saw.
func (p *FaultProxy) Injected() (map[Fault]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[Fault]int{}
	for f, n := range p.injected {
		out[f] = n
	}
	return out, p.writes
}

// Close stops serving and closes every connection.
func (p *FaultProxy) Close() {
	p.srv.Close()
	p.tr.CloseIdleConnections()
}

func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	ua := r.UserAgent()
	fault := Fault("")
	p.mu.Lock()
	if conn != nil {
		p.conns[conn] = ua
	}
	cut := slices.ContainsFunc(p.partitioned, func(prefix string) bool { return strings.HasPrefix(ua, prefix) })
	if !cut && isWrite(r.Method) {
		p.writes++
		if p.rate > 0 && p.rng.Float64() < p.rate {
			fault = Faults[p.rng.IntN(len(Faults))]
			p.injected[fault]++
		}
	}
	p.mu.Unlock()
	switch {
	case cut:
		drop(w)
	case fault == "":
		p.rp.ServeHTTP(w, r)
	case fault == FaultConflict:
		status(w, http.StatusConflict, "Conflict", "injected: the object has been modified; please apply your changes to the latest version and try again")
	case fault == FaultTooManyRequests:
		w.Header().Set("Retry-After", "1")
		status(w, http.StatusTooManyRequests, "TooManyRequests", "injected: too many requests, please try again later")
	case fault == FaultTimeout:
		status(w, http.StatusGatewayTimeout, "Timeout", "injected: the request timed out before it was forwarded")
	default:
		// Forward, wait for kube-apiserver's answer (the write is done
		// or refused), then lose it.
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = p.backend.Load().Scheme, p.backend.Load().Host
		out.Host = out.URL.Host
		body, _ := io.ReadAll(r.Body)
		out.Body = io.NopCloser(bytes.NewReader(body))
		if resp, err := p.tr.RoundTrip(out); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if fault == FaultDropAfterWrite {
			drop(w)
			return
		}
		status(w, http.StatusGatewayTimeout, "Timeout", "injected: the write was forwarded and its answer lost")
	}
}

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	c, _, err := hj.Hijack()
	if err == nil {
		c.Close()
	}
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

// StallProxy is a TCP proxy between kube-apiserver and etcd that can stop
// relaying bytes for a while: etcd as kube-apiserver sees it when its disk
// or its leader stalls. Requests in flight wait; those that outlast
// kube-apiserver's request timeout fail with their outcome unknown.
type StallProxy struct {
	Addr    string
	backend string
	ln      net.Listener

	mu     sync.Mutex
	resume chan struct{} // nil when relaying
	conns  map[net.Conn]struct{}
}

// NewStallProxy relays a loopback port to backend (host:port).
func NewStallProxy(backend string) (*StallProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &StallProxy{Addr: ln.Addr().String(), backend: backend, ln: ln, conns: map[net.Conn]struct{}{}}
	go s.accept()
	return s, nil
}

func (s *StallProxy) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", s.backend)
		if err != nil {
			c.Close()
			continue
		}
		s.mu.Lock()
		s.conns[c], s.conns[b] = struct{}{}, struct{}{}
		s.mu.Unlock()
		go s.relay(c, b)
		go s.relay(b, c)
	}
}

func (s *StallProxy) relay(dst, src net.Conn) {
	defer func() {
		dst.Close()
		src.Close()
		s.mu.Lock()
		delete(s.conns, dst)
		delete(s.conns, src)
		s.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			s.mu.Lock()
			resume := s.resume
			s.mu.Unlock()
			if resume != nil {
				<-resume
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall stops relaying for d, then relays again; it returns at once.
func (s *StallProxy) Stall(d time.Duration) {
	s.mu.Lock()
	if s.resume != nil {
		s.mu.Unlock()
		return
	}
	resume := make(chan struct{})
	s.resume = resume
	s.mu.Unlock()
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.release(resume)
	})
}

// release relays again if resume is the current stall; s.mu is held.
func (s *StallProxy) release(resume chan struct{}) {
	if s.resume == resume && resume != nil {
		s.resume = nil
		close(resume)
	}
}

// Close stops relaying and closes every connection.
func (s *StallProxy) Close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(s.resume)
	for c := range s.conns {
		c.Close()
	}
}
