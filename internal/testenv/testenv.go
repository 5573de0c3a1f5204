// Package testenv gives tests the services that scripts/test.sh starts: a
// throwaway PostgreSQL and a throwaway OpenSSH sshd. When a service is not
// configured, a test fails under CI=true and is skipped otherwise (a plain
// `go test` on a developer's machine).
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// InCI reports whether the tests run under CI, where nothing may skip.
func InCI() bool { return os.Getenv("CI") != "" }

func need(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if InCI() {
		t.Fatalf("%s is not set: run the tests with scripts/test.sh, which starts the services", name)
	}
	t.Skipf("%s is not set (scripts/test.sh starts the services)", name)
	return ""
}

// PostgresURL returns the URL of the test PostgreSQL server.
func PostgresURL(t testing.TB) string { return need(t, "EDIWATCH_TEST_POSTGRES") }

// PgBouncer returns the host:port of the test PgBouncer: transaction
// pooling mode in front of the test PostgreSQL (PostgresURL), any
// database name passed to the server's database of that name.
func PgBouncer(t testing.TB) string { return need(t, "EDIWATCH_TEST_PGBOUNCER") }

// PgAutoctl returns the path of pg_auto_failover's pg_autoctl, whose
// PostgreSQL extension is installed for PostgresBin's server, for a test
// that creates a formation (pgtest.NewFormation).
func PgAutoctl(t testing.TB) string { return need(t, "EDIWATCH_TEST_PG_AUTOCTL") }

// PostgresBin returns the directory of the PostgreSQL server's programs
// (initdb, pg_ctl, pg_basebackup), for a test that builds a cluster of
// its own.
func PostgresBin(t testing.TB) string { return need(t, "EDIWATCH_TEST_PG_BIN") }

// PostgresHA returns the URLs of the test PostgreSQL primary that has a
// streaming standby, and of that standby: a server of their own, so a
// test may stall its replication.
func PostgresHA(t testing.TB) (primary, standby string) {
	return need(t, "EDIWATCH_TEST_POSTGRES_HA"), need(t, "EDIWATCH_TEST_POSTGRES_HA_STANDBY")
}

// SSHD describes the test OpenSSH server.
type SSHD struct {
	Addr       string // host:port
	User       string
	KeyFile    string // the user's private key
	KnownHosts string // a known_hosts file holding the server's host key
	Drop       string // the local path of the directory SFTP sessions start in
}

// OpenSSH returns the test OpenSSH server.
func OpenSSH(t testing.TB) SSHD {
	return SSHD{
		Addr:       need(t, "EDIWATCH_TEST_SSHD_ADDR"),
		User:       need(t, "EDIWATCH_TEST_SSHD_USER"),
		KeyFile:    need(t, "EDIWATCH_TEST_SSHD_KEY"),
		KnownHosts: need(t, "EDIWATCH_TEST_SSHD_KNOWN_HOSTS"),
		Drop:       need(t, "EDIWATCH_TEST_SSHD_DROP"),
	}
}

// OpenSSHRestricted returns the test OpenSSH server as reached on its
// port whose SFTP subsystem runs with the restriction named: "readonly"
// (internal-sftp -R) or "noremove" (internal-sftp -P remove). The same
// user, keys and drop; each port its own connection.
func OpenSSHRestricted(t testing.TB, restriction string) SSHD {
	s := OpenSSH(t)
	switch restriction {
	case "readonly":
		s.Addr = need(t, "EDIWATCH_TEST_SSHD_ADDR_READONLY")
	case "noremove":
		s.Addr = need(t, "EDIWATCH_TEST_SSHD_ADDR_NOREMOVE")
	default:
		t.Fatalf("testenv: unknown SFTP restriction %q", restriction)
	}
	return s
}

// Corpus returns the directory of the public X12 corpus the repository
// keeps as test data (internal/envelope/testdata/corpus, with its
// SOURCES.md), so a fresh clone has everything its tests read.
func Corpus(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testenv: cannot locate the repository")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "envelope", "testdata", "corpus")
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Fatalf("the X12 corpus is missing: %v", err)
	}
	return dir
}
