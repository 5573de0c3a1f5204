package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// TLSFiles name the files of an HTTP sink's own trust and identity, for a
// receiver behind a private certificate authority or one that asks for
// a client certificate (mutual TLS). Empty names keep Go's defaults.
type TLSFiles struct {
	// CAFile holds the PEM certificates that vouch for the receiver's
	// certificate, in place of the system roots.
	CAFile string
	// CertFile and KeyFile hold the PEM certificate (with its chain) and
	// private key presented when the receiver asks for one; both or
	// neither.
	CertFile, KeyFile string
}

// ClientTLS returns the TLS configuration of a sink with files f: TLS 1.2
// at least, the receiver verified against CAFile's certificates when set,
// and the client certificate of CertFile and KeyFile. The certificate and
// key are read when ClientTLS is called, and again at a new connection's
// handshake once either file has changed, so a renewed certificate is
// presented without a restart; a pair that does not load (the files
// replaced one at a time) leaves the one before in use until it does.
// Errors name the settings, never a key's path or any content.
func ClientTLS(f TLSFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("cert_file and key_file go together")
	}
	if f.CertFile != "" {
		kp := &keyPair{certFile: f.CertFile, keyFile: f.KeyFile}
		if err := kp.load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = kp.get
	}
	return cfg, nil
}

// keyPair is a client certificate read from its files, read again when
// they change.
type keyPair struct {
	certFile, keyFile string

	mu   sync.Mutex
	cert *tls.Certificate
	// seen is the files' size and modification time when the pair in
	// use was read.
	seen [2]fileStamp
}

type fileStamp struct{ size, mtime int64 }

func stamp(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1}
	}
	return fileStamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
}

// load reads the pair; its error names the settings, not the paths (a
// key pasted where key_file's path belongs is not shown) nor the
// content. On
// an error the pair in use stays, and so do its stamps: the next
// handshake tries again.
func (kp *keyPair) load() error {
	seen := [2]fileStamp{stamp(kp.certFile), stamp(kp.keyFile)}
	c, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("cert_file and key_file: %w", loadError(err))
	}
	kp.cert, kp.seen = &c, seen
	return nil
}

// loadError is err without a path or anything of a file's content: the
// standard library's messages for a bad pair name the PEM block types it
// found, which is safe, and wrap os errors, which name the path (dropped).
func loadError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// get implements tls.Config.GetClientCertificate.
func (kp *keyPair) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if now := [2]fileStamp{stamp(kp.certFile), stamp(kp.keyFile)}; now != kp.seen {
		_ = kp.load() // half-replaced: the pair before until both files match
	}
	return kp.cert, nil
}
