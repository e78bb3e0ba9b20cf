// Package testca makes a private certificate authority and certificates
// signed by it, as PEM files, for tests and local clusters with TLS (a
// Nomad agent's tls {} block, Rondo's own). Not for production: keys are
// written unencrypted and live a day.
package testca

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

// CA is a private certificate authority whose files live in Dir.
type CA struct {
	Dir string
	// CertFile is the CA's certificate (what clients trust).
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	serial   int64
}

// New makes a CA in dir (created): dir/ca.pem.
func New(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Rondo test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Dir: dir, CertFile: filepath.Join(dir, "ca.pem"), cert: cert, key: key, serial: 1}
	return ca, writePEM(ca.CertFile, "CERTIFICATE", der)
}

// Issue signs a certificate for name (its common name and first DNS
// name) valid for the extra DNS names and IPs, usable by servers and
// clients alike (Nomad's agents are both), and writes dir/<file>.pem and
// dir/<file>-key.pem.
func (ca *CA) Issue(file, name string, dns []string, ips []net.IP) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	ca.serial++
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: append([]string{name}, dns...), IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(ca.Dir, file+".pem"), filepath.Join(ca.Dir, file+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", kder)
}

// Localhost are the addresses a local cluster's certificates name.
var Localhost = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("testca: %w", err)
	}
	return nil
}
