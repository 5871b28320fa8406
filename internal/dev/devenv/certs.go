package devenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// pki is the set of keys and certificates of a dev cluster, all under one
// folder. They are generated once and reused on later starts, so kubeconfigs
// handed out earlier keep working.
type pki struct {
	dir string
}

// File names inside the pki folder.
const (
	caCert        = "ca.crt"
	caKey         = "ca.key"
	servingCert   = "apiserver.crt"
	servingKey    = "apiserver.key"
	saKey         = "sa.key"
	saPub         = "sa.pub"
	certValidity  = 10 * 365 * 24 * time.Hour
	adminUser     = "stratus-dev-admin"
	kcmUser       = "system:kube-controller-manager"
	mastersGroup  = "system:masters"
	schedulerUser = "system:kube-scheduler"
	// kubeProxyUser is the identity the default RBAC binds to
	// system:node-proxier.
	kubeProxyUser = "system:kube-proxy"
	// nodesGroup and nodeUserPrefix make a kubelet's identity, as the Node
	// authorizer expects it.
	nodesGroup     = "system:nodes"
	nodeUserPrefix = "system:node:"
	// kubernetesServiceIP is the ClusterIP of the kubernetes Service: the
	// first address of ServiceCIDR.
	kubernetesServiceIP = "10.96.0.1"
	clientCertExt       = ".crt"
	clientKeyExt        = ".key"
)

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensure creates whatever is missing: the CA, the API server's serving
// certificate (for 127.0.0.1 and localhost), the service-account key pair and
// the client certificates of the admin and kube-controller-manager.
func (p pki) ensure(servingIPs ...net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	ca, caSigner, err := p.ensureCA()
	if err != nil {
		return err
	}
	// The first address of the Service range is the kubernetes Service's
	// ClusterIP, which pods on real nodes connect to.
	ips := append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(kubernetesServiceIP)}, servingIPs...)
	if !p.certNames(servingCert, ips) {
		// An environment started before without these addresses gets a
		// serving certificate that names them.
		_ = os.Remove(p.path(servingCert))
	}
	if err := p.ensureLeaf("apiserver", pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		ips, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, ca, caSigner); err != nil {
		return err
	}
	if err := p.ensureLeaf("admin", pkix.Name{CommonName: adminUser, Organization: []string{mastersGroup}}, x509.ExtKeyUsageClientAuth, nil, nil, ca, caSigner); err != nil {
		return err
	}
	if err := p.ensureLeaf("kube-controller-manager", pkix.Name{CommonName: kcmUser}, x509.ExtKeyUsageClientAuth, nil, nil, ca, caSigner); err != nil {
		return err
	}
	// The API server's identity towards kubelets (logs, exec, port-forward),
	// which real kubelets authenticate and authorize through the API.
	if err := p.ensureLeaf("apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{mastersGroup}}, x509.ExtKeyUsageClientAuth, nil, nil, ca, caSigner); err != nil {
		return err
	}
	return p.ensureServiceAccountKey()
}

// certNames reports whether the certificate file exists and names every
// address.
func (p pki) certNames(name string, ips []net.IP) bool {
	certs, err := certutil.CertsFromFile(p.path(name))
	if err != nil || len(certs) == 0 {
		return false
	}
	for _, ip := range ips {
		if certs[0].VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

// ensureClient writes the client certificate <name>.crt and its key for
// subject, signed by the CA, unless they exist.
func (p pki) ensureClient(name string, subject pkix.Name) error {
	ca, caSigner, err := p.ensureCA()
	if err != nil {
		return err
	}
	return p.ensureLeaf(name, subject, x509.ExtKeyUsageClientAuth, nil, nil, ca, caSigner)
}

func (p pki) ensureCA() (*x509.Certificate, crypto.Signer, error) {
	if certs, err := certutil.CertsFromFile(p.path(caCert)); err == nil {
		key, err := keyutil.PrivateKeyFromFile(p.path(caKey))
		if err != nil {
			return nil, nil, fmt.Errorf("pki: read CA key: %w", err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, nil, fmt.Errorf("pki: CA key %s is not a signing key", p.path(caKey))
		}
		return certs[0], signer, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("pki: read CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA key: %w", err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "stratus-dev-ca"}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	if err := p.writeKeyPair(caCert, caKey, ca.Raw, key); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// ensureLeaf writes <name>.crt and <name>.key signed by the CA unless they
// exist.
func (p pki) ensureLeaf(name string, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string, ca *x509.Certificate, caSigner crypto.Signer) error {
	if _, err := os.Stat(p.path(name + clientCertExt)); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: %s key: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("pki: %s serial: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caSigner)
	if err != nil {
		return fmt.Errorf("pki: %s certificate: %w", name, err)
	}
	return p.writeKeyPair(name+clientCertExt, name+clientKeyExt, der, key)
}

func (p pki) writeKeyPair(certName, keyName string, der []byte, key crypto.PrivateKey) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("pki: encode %s: %w", keyName, err)
	}
	if err := keyutil.WriteKey(p.path(keyName), keyPEM); err != nil {
		return fmt.Errorf("pki: write %s: %w", keyName, err)
	}
	certPEM, err := certutil.EncodeCertificates(&x509.Certificate{Raw: der})
	if err != nil {
		return fmt.Errorf("pki: encode %s: %w", certName, err)
	}
	if err := certutil.WriteCert(p.path(certName), certPEM); err != nil {
		return fmt.Errorf("pki: write %s: %w", certName, err)
	}
	return nil
}

// ensureServiceAccountKey writes the RSA key pair that signs service-account
// tokens (kube-apiserver verifies with sa.pub and signs with sa.key).
func (p pki) ensureServiceAccountKey() error {
	if _, err := os.Stat(p.path(saKey)); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("pki: encode service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("pki: encode service-account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := keyutil.WriteKey(p.path(saKey), keyPEM); err != nil {
		return fmt.Errorf("pki: write service-account key: %w", err)
	}
	if err := os.WriteFile(p.path(saPub), pubPEM, 0o644); err != nil {
		return fmt.Errorf("pki: write service-account public key: %w", err)
	}
	return nil
}
