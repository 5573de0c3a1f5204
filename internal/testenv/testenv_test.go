package testenv

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestPostgresServes proves the test command's PostgreSQL accepts
// connections and runs statements.
func TestPostgresServes(t *testing.T) {
	url := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 40 + 2").Scan(&n); err != nil || n != 42 {
		t.Fatalf("query: %d, %v", n, err)
	}
}

func sshConfig(t *testing.T, s SSHD, hostKeys ssh.HostKeyCallback) *ssh.ClientConfig {
	t.Helper()
	pem, err := os.ReadFile(s.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	return &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys, Timeout: 10 * time.Second}
}

// TestOpenSSHServesSFTP proves the test command's sshd serves SFTP from the
// drop directory with a verified host key, and refuses nothing it should
// accept.
func TestOpenSSHServesSFTP(t *testing.T) {
	s := OpenSSH(t)
	hk, err := knownhosts.New(s.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.Dial("tcp", s.Addr, sshConfig(t, s, hk))
	if err != nil {
		t.Fatalf("ssh dial %s: %v", s.Addr, err)
	}
	defer client.Close()
	sc, err := sftp.NewClient(client)
	if err != nil {
		t.Fatalf("sftp: %v", err)
	}
	defer sc.Close()
	name := "testenv-" + strings.ReplaceAll(t.Name(), "/", "_") + ".x12"
	if err := os.WriteFile(filepath.Join(s.Drop, name), []byte("ISA*00~"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(s.Drop, name))
	wd, err := sc.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := sc.Stat(wd + "/" + name)
	if err != nil || fi.Size() != 7 {
		t.Fatalf("stat over sftp in %s: %v %v", wd, fi, err)
	}
}

// TestOpenSSHUnknownHostKeyRefused: a host key missing from known_hosts is
// refused by the client.
func TestOpenSSHUnknownHostKeyRefused(t *testing.T) {
	s := OpenSSH(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hk, err := knownhosts.New(empty)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ssh.Dial("tcp", s.Addr, sshConfig(t, s, hk))
	var keyErr *knownhosts.KeyError
	if err == nil || !strings.Contains(err.Error(), "knownhosts: key is unknown") {
		t.Fatalf("dial with an empty known_hosts: %v (%T)", err, keyErr)
	}
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err != nil {
		t.Fatalf("server not reachable: %v", err)
	}
}
