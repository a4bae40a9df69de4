package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// kubeletPKI is the certificate authority between kube-apiserver and the
// kubelets of real Nodes, as kubeadm sets one up: kube-apiserver presents
// a client certificate (--kubelet-client-certificate) that kubelets
// authenticate with the CA (authentication.x509.clientCAFile) and
// authorize by asking kube-apiserver (authorization mode Webhook: the
// certificate's user is bound to system:kubelet-api-admin); each kubelet
// serves with a certificate for its node's address, which kube-apiserver
// verifies with the same CA (--kubelet-certificate-authority) when it
// proxies a pod's log or exec. Kubelets reach kube-apiserver with the
// node's token (NodeConfig), not a certificate, so no TLS bootstrap runs.
type kubeletPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
}

// kubeletClientUser is who kube-apiserver is to kubelets.
const kubeletClientUser = "kube-apiserver-kubelet-client"

func newKubeletPKI(dir string) (*kubeletPKI, error) {
	p := &kubeletPKI{dir: dir, caFile: filepath.Join(dir, "kubelet-ca.crt")}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dractl-e2e-kubelet-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caKey = key
	return p, writePEM(p.caFile, "CERTIFICATE", der)
}

// issue writes a certificate and key signed by the CA to dir/name.crt and
// dir/name.key and returns their paths.
func (p *kubeletPKI) issue(dir, name string, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: ips, DNSNames: dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := writePEM(cert, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return cert, key, writePEM(key, "EC PRIVATE KEY", kder)
}

// apiServerFlags are kube-apiserver's flags for talking to kubelets.
func (p *kubeletPKI) apiServerFlags() ([]string, error) {
	cert, key, err := p.issue(p.dir, "apiserver-kubelet-client", pkix.Name{CommonName: kubeletClientUser}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	return []string{
		"--kubelet-client-certificate=" + cert,
		"--kubelet-client-key=" + key,
		"--kubelet-certificate-authority=" + p.caFile,
		// A kubelet reports its --hostname-override as the Node's
		// Hostname address, which no resolver here knows: its address
		// is the InternalIP (the veth the framework made for it).
		"--kubelet-preferred-address-types=InternalIP",
	}, nil
}

// servingCert is a kubelet's serving certificate for its node.
func (p *kubeletPKI) servingCert(dir, node string, ip net.IP) (cert, key string, err error) {
	return p.issue(dir, "kubelet", pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		x509.ExtKeyUsageServerAuth, []net.IP{ip}, []string{node})
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
