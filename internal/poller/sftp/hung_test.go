package sftp

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/testenv"
)

// silentSSHD starts a second OpenSSH sshd, configured as the test one but
// whose SFTP sessions run a command that never answers: the SSH handshake
// and the subsystem request succeed, the SFTP version never comes (a
// clearinghouse server hung behind its SSH front). It returns its address
// and a known_hosts file for it.
func silentSSHD(t *testing.T) (addr, knownHosts string) {
	return secondSSHD(t, "cat >/dev/null")
}

// secondSSHD starts a second OpenSSH sshd, configured as the test one but
// whose sessions run forceCommand, and returns its address and a
// known_hosts file for it.
func secondSSHD(t *testing.T, forceCommand string) (addr, knownHosts string) {
	sshd := testenv.OpenSSH(t)
	conf, err := os.ReadFile(os.Getenv("EDIWATCH_TEST_SSHD_CONFIG"))
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("EDIWATCH_TEST_SSHD_CONFIG: %v", err)
		}
		t.Skip("no sshd config to copy")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	_, oldPort, _ := net.SplitHostPort(sshd.Addr)
	dir := t.TempDir()
	c := regexp.MustCompile(`(?m)^Port .*$`).ReplaceAllString(string(conf), "Port "+port)
	c = regexp.MustCompile(`(?m)^PidFile .*$`).ReplaceAllString(c, "PidFile "+filepath.Join(dir, "sshd.pid"))
	c = regexp.MustCompile(`(?m)^ForceCommand .*$`).ReplaceAllLiteralString(c, "ForceCommand "+forceCommand)
	cfgFile := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfgFile, []byte(c), 0o600)
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfgFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatal("the second sshd does not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	kh, _ := os.ReadFile(sshd.KnownHosts)
	knownHosts = filepath.Join(dir, "known_hosts")
	os.WriteFile(knownHosts, []byte(strings.ReplaceAll(string(kh), "]:"+oldPort, "]:"+port)), 0o600)
	return addr, knownHosts
}

// TestServerThatNeverStartsSFTPIsATimeout: a server that completes the SSH
// handshake but never answers the SFTP version request fails the call
// within the connect timeout instead of holding it (and, through the
// connection's lock, every other worker and the shutdown) for good.
func TestServerThatNeverStartsSFTPIsATimeout(t *testing.T) {
	sshd := testenv.OpenSSH(t)
	addr, knownHosts := silentSSHD(t)
	src, err := New(Config{Address: addr, User: sshd.User, PrivateKeyFile: sshd.KeyFile, KnownHostsFile: knownHosts,
		Timeout: 2 * time.Second, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := src.List(context.Background(), "/"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("listing on a server without SFTP succeeded")
		}
		src.Close()
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		// Not closed: Close would wait for the connection's lock as long.
		t.Fatal("the call is still waiting for the SFTP version a minute later")
	}
}
