package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/sink/sftpsink"
)

func loadYAML(t *testing.T, yaml string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

const sftpSinkYAML = `sinks:
  s: {url: "https://x.example.test/"}
  partner:
    type: sftp
    address: "sftp.example.test:22"
    user: riverside
    private_key_file: /etc/ediwatch/id_ed25519
    known_hosts_file: /etc/ediwatch/known_hosts
    directory: /inbound
`

// TestSFTPSinkDefaultsAndRequiredKeys: a sink of type sftp takes the
// defaults (temp_suffix .part, rename true, the default name) and needs
// address, user, a key or password, known_hosts_file and directory; a URL
// or an unsafe name pattern is refused.
func TestSFTPSinkDefaultsAndRequiredKeys(t *testing.T) {
	c, err := loadYAML(t, sftpSinkYAML+"routes: {payment.posted: s, claim.received: s, ack.999: partner, ack.ta1: partner}\n")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Sinks["partner"]
	if p.Type != "sftp" || p.TempSuffix != ".part" || !p.Rename || p.Name != sftpsink.DefaultName || c.Sinks["s"].Type != "http" {
		t.Errorf("sink %+v", p)
	}
	_, err = loadYAML(t, `sinks:
  partner: {type: sftp, url: "https://x.example.test/", name: "../{control}", temp_suffix: ""}
routes: {payment.posted: partner, claim.received: partner, ack.999: partner, ack.ta1: partner}
`)
	for _, want := range []string{"sinks.partner.url", "sinks.partner.address", "sinks.partner.user",
		"sinks.partner.private_key_file", "sinks.partner.known_hosts_file", "sinks.partner.directory",
		"sinks.partner.temp_suffix", "sinks.partner.name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %s in %v", want, err)
		}
	}
	if _, err := loadYAML(t, `sinks:
  x: {type: ftp, url: "https://x.example.test/"}
`); err == nil || !strings.Contains(err.Error(), "sinks.x.type") {
		t.Errorf("type ftp: %v", err)
	}
	// A name no SFTP server takes: past 255 bytes with the longest values.
	long := strings.Repeat("x", 200) + "_{sender}_{receiver}_{id}.{ext}"
	_, err = loadYAML(t, sftpSinkYAML+"    name: \""+long+"\"\n"+
		"routes: {payment.posted: s, claim.received: s, ack.999: partner, ack.ta1: partner}\n")
	if err == nil || !strings.Contains(err.Error(), "sinks.partner.name") || !strings.Contains(err.Error(), "255") {
		t.Errorf("a name pattern past 255 bytes: %v", err)
	}
}

// TestRoutesNameSeveralSinksAndSourcesOverride: a route is one sink or a
// list; a source's routes replace the global ones kind by kind for what it
// produced; every named sink must exist, none twice; delivery.dead takes
// one sink (TestDeliveryDeadRouteTakesOneSink).
func TestRoutesNameSeveralSinksAndSourcesOverride(t *testing.T) {
	c, err := loadYAML(t, sftpSinkYAML+`routes: {payment.posted: s, claim.received: [s], ack.999: [s, partner], ack.ta1: s, delivery.dead: [s]}
sources:
  - {name: a, type: local, directories: [/in]}
  - {name: b, type: local, directories: [/in-b], routes: {ack.999: [partner], ack.ta1: partner}}
`)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Routes["ack.999"]) != "[s partner]" || fmt.Sprint(c.Routes["payment.posted"]) != "[s]" ||
		c.DeadEventSink() != "s" {
		t.Errorf("routes %v", c.Routes)
	}
	a, b := c.RoutesFor("a"), c.RoutesFor("b")
	if fmt.Sprint(a["ack.999"]) != "[s partner]" || fmt.Sprint(b["ack.999"]) != "[partner]" ||
		fmt.Sprint(b["ack.ta1"]) != "[partner]" || fmt.Sprint(b["payment.posted"]) != "[s]" {
		t.Errorf("routes of a %v, of b %v", a, b)
	}
	if fmt.Sprint(c.Routes["ack.999"]) != "[s partner]" {
		t.Errorf("RoutesFor changed the global routes: %v", c.Routes)
	}
	_, err = loadYAML(t, sftpSinkYAML+`routes: {payment.posted: [s, s], claim.received: [], ack.999: [s, nope], ack.ta1: s}
sources:
  - {name: b, type: local, directories: [/in-b], routes: {ack.99: partner, delivery.dead: s, ack.ta1: ghost}}
`)
	for _, want := range []string{`routes.payment.posted: names a sink twice`, `routes.claim.received: must name a sink`,
		`routes.ack.999: must name a configured sink (got "nope")`, `sources[0].routes.ack.99: is not an effect kind`,
		`sources[0].routes.delivery.dead: is not an effect kind`, `sources[0].routes.ack.ta1: must name a configured sink (got "ghost")`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	// A kind every source routes itself need not be routed globally.
	if _, err := loadYAML(t, sftpSinkYAML+`routes: {payment.posted: s, claim.received: s, ack.ta1: s}
sources:
  - {name: a, type: local, directories: [/in], routes: {ack.999: partner}}
`); err != nil {
		t.Errorf("ack.999 routed by its only source: %v", err)
	}
	if _, err := loadYAML(t, sftpSinkYAML+`routes: {payment.posted: s, claim.received: s, ack.ta1: s}
sources:
  - {name: a, type: local, directories: [/in], routes: {ack.999: partner}}
  - {name: b, type: local, directories: [/in-b]}
`); err == nil || !strings.Contains(err.Error(), "routes.ack.999: must be routed") {
		t.Errorf("ack.999 unrouted for source b: %v", err)
	}
}

// TestSFTPAddressWithCredentialsIsRefusedRedacted: a user and password
// written into an sftp address (the habit of sftp://user:pass@host URLs)
// is refused, for a sink and for a source, without the password in the
// message.
func TestSFTPAddressWithCredentialsIsRefusedRedacted(t *testing.T) {
	_, err := loadYAML(t, strings.Replace(sftpSinkYAML, `"sftp.example.test:22"`, `"riverside:hunter2@sftp.example.test:22"`, 1)+
		`routes: {payment.posted: s, claim.received: s, ack.999: partner, ack.ta1: partner}
sources:
  - {name: a, type: sftp, address: "riverside:hunter2@sftp.example.test:22", user: riverside,
     private_key_file: /k, known_hosts_file: /kh, directories: [/in]}
`)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "sinks.partner.address") ||
		!strings.Contains(err.Error(), "sources[0].address") {
		t.Errorf("an address with credentials: %v", err)
	}
}
