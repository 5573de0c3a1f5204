// Package sftpsink is the SFTP sink: each delivery becomes one file in a
// directory of a partner's SFTP server, an acknowledgment ediwatch sends
// (ack.999, ack.ta1) as its raw X12 (one interchange per file), every other
// kind as its CloudEvents JSON event.
//
// A file is uploaded under its final name plus a temporary suffix and
// renamed into place: with posix-rename@openssh.com when the server offers
// it (an existing file of that name is replaced atomically), else by
// removing the final name first. With Rename off (servers without RENAME)
// the final name is written directly. Either way the final name is
// deterministic from the effect, so a retry after a crash replaces the same
// file and never leaves two, and a delivery counts only once a stat of the
// final file shows the size written.
//
// Connections are made as the SFTP source makes them (internal/poller/sftp:
// known_hosts required, unknown host keys refused); one is shared by every
// relay worker and re-established after a failure.
package sftpsink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/ediwatch/ediwatch/internal/pgp"
	psftp "github.com/ediwatch/ediwatch/internal/poller/sftp"
	"github.com/ediwatch/ediwatch/internal/sink"
)

// Defaults of a Config that leaves them out.
const (
	DefaultTempSuffix = ".part"
	DefaultName       = "{kind}_{sender}_{control}.{ext}"
	DefaultTimeout    = 30 * time.Second
)

// Config configures an SFTP sink.
type Config struct {
	Name string
	// Conn is how to reach the server (credentials and known_hosts from
	// files, as for a source).
	Conn psftp.Config
	// Directory receives the files.
	Directory string
	// TempSuffix is appended to the final name while uploading (default
	// DefaultTempSuffix).
	TempSuffix string
	// Direct writes the final name directly (rename: false), for servers
	// without RENAME.
	Direct bool
	// Pattern is the final file name (default DefaultName); see
	// CheckPattern for its placeholders.
	Pattern string
	// Timeout bounds one delivery, connecting included (default 30s).
	Timeout time.Duration
	// Encrypt, when set (encrypt_to, sign_with), seals each file as an
	// OpenPGP message to the partner before upload; the size check is
	// then of the message.
	Encrypt *pgp.Encrypter
}

// SFTP is an SFTP sink. It is safe for concurrent use.
type SFTP struct {
	cfg  Config
	conn *psftp.Source
	// plainRename ignores posix-rename@openssh.com (tests of the
	// fallback for servers without it).
	plainRename bool
}

// New checks the configuration and reads the credentials and known hosts;
// the first delivery connects.
func New(cfg Config) (*SFTP, error) {
	if cfg.TempSuffix == "" {
		cfg.TempSuffix = DefaultTempSuffix
	}
	if cfg.Pattern == "" {
		cfg.Pattern = DefaultName
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Directory == "" {
		return nil, fmt.Errorf("sink %s: directory is required", cfg.Name)
	}
	if err := CheckPattern(cfg.Pattern); err != nil {
		return nil, fmt.Errorf("sink %s: name: %w", cfg.Name, err)
	}
	if strings.ContainsAny(cfg.TempSuffix, `/\`) {
		return nil, fmt.Errorf("sink %s: temp_suffix %q holds a path separator", cfg.Name, cfg.TempSuffix)
	}
	if cfg.Conn.Timeout <= 0 {
		cfg.Conn.Timeout = cfg.Timeout
	}
	c, err := psftp.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", cfg.Name, err)
	}
	return &SFTP{cfg: cfg, conn: c}, nil
}

// Close closes the connection.
func (s *SFTP) Close() error { return s.conn.Close() }

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// placeholders are the names a pattern may use.
var placeholders = []string{"kind", "sender", "receiver", "control", "group", "set", "id", "ext"}

// CheckPattern reports whether p is a usable file-name pattern: a name
// without path separators, not starting with a dot, whose placeholders
// are among {kind} (the effect kind, e.g. ack.999), {sender} and
// {receiver} (ISA06 and ISA08 of an acknowledgment; an event's sender and
// receiver), {control} (ISA13 of an acknowledgment; an event's {id}),
// {group} and {set} (GS06 and ST02; "none" when absent), {id} (16 hex
// digits of the SHA-256 of the effect key) and {ext} (x12 or json), and
// that holds {control} or {id}, so names differ between effects.
func CheckPattern(p string) error {
	if p == "" || strings.ContainsAny(p, "/\\\x00") || strings.HasPrefix(p, ".") {
		return fmt.Errorf("%q must be a file name without path separators, not starting with a dot", p)
	}
	unique := false
	for _, ph := range placeholderRE.FindAllString(p, -1) {
		name := strings.Trim(ph, "{}")
		known := false
		for _, k := range placeholders {
			known = known || k == name
		}
		if !known {
			return fmt.Errorf("%q: unknown placeholder %s (known: {%s})", p, ph, strings.Join(placeholders, "}, {"))
		}
		unique = unique || name == "control" || name == "id"
	}
	if strings.ContainsAny(placeholderRE.ReplaceAllString(p, ""), "{}") {
		return fmt.Errorf("%q: unbalanced braces", p)
	}
	if !unique {
		return fmt.Errorf("%q must hold {control} or {id}, so each effect gets its own file", p)
	}
	return nil
}

// FileName returns the final file name of a message under pattern, and
// the body and extension written. Values taken from partner data are
// reduced to letters, digits, '.', '-' and '_' (anything else becomes
// '_'), so no name leaves the directory.
func FileName(pattern string, msg sink.Message) (string, []byte, error) {
	body, ext, err := sink.FileBody(msg)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256([]byte(msg.EffectKey))
	id := hex.EncodeToString(sum[:8])
	v := map[string]string{"kind": msg.Kind, "id": id, "ext": ext, "control": id, "group": "none", "set": "none",
		"sender": "none", "receiver": "none"}
	if ext == "x12" {
		isa, gs06, st02 := envelope(string(body))
		if len(isa) < 14 {
			return "", nil, errors.New("ack payload: no ISA segment")
		}
		v["sender"], v["receiver"], v["control"] = isa[6], isa[8], isa[13]
		if gs06 != "" {
			v["group"] = gs06
		}
		if st02 != "" {
			v["set"] = st02
		}
	} else {
		var head struct {
			Sender   any `json:"sender"`
			Receiver any `json:"receiver"`
		}
		if json.Unmarshal(msg.Payload, &head) == nil {
			if s, ok := head.Sender.(string); ok && s != "" {
				v["sender"] = s
			}
			if s, ok := head.Receiver.(string); ok && s != "" {
				v["receiver"] = s
			}
		}
	}
	name := placeholderRE.ReplaceAllStringFunc(pattern, func(ph string) string { return safe(v[strings.Trim(ph, "{}")]) })
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		return "", nil, fmt.Errorf("file name %q is not usable", name)
	}
	return name, body, nil
}

// safe reduces a value to a file-name part: letters, digits, '.', '-' and
// '_', at most 64 bytes, never only dots.
func safe(s string) string {
	s = strings.TrimSpace(s)
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if strings.Trim(string(b), ".") == "" {
		return strings.Repeat("_", len(b))
	}
	return string(b)
}

// envelope returns the ISA elements (ISA01 at index 1), GS06 and ST02 of
// the first interchange of x.
func envelope(x string) (isa []string, gs06, st02 string) {
	x = strings.TrimLeft(x, " \t\r\n\ufeff")
	if len(x) < 106 || !strings.HasPrefix(x, "ISA") {
		return nil, "", ""
	}
	sep := x[3]
	parts := strings.SplitN(x, string(sep), 17)
	if len(parts) < 17 || len(parts[16]) < 2 {
		return nil, "", ""
	}
	term := parts[16][1]
	for _, seg := range strings.Split(x, string(term)) {
		seg = strings.TrimLeft(seg, " \t\r\n")
		el := strings.Split(seg, string(sep))
		switch {
		case el[0] == "ISA" && isa == nil:
			isa = el
			for i := range isa {
				isa[i] = strings.TrimSpace(isa[i])
			}
		case el[0] == "GS" && len(el) > 6 && gs06 == "":
			gs06 = el[6]
		case el[0] == "ST" && len(el) > 2 && st02 == "":
			st02 = el[2]
		}
	}
	return isa, gs06, st02
}

// Deliver writes msg as one file. Every failure to write is retried (a
// lost connection, a timeout, a refused permission, a missing directory, a
// full disk), its reason in Result.Err (the relay's max_attempts and
// max_age dead-letter it); a message that makes no file is dead. Err never
// holds file content.
func (s *SFTP) Deliver(ctx context.Context, msg sink.Message, _ time.Time) sink.Result {
	name, body, err := FileName(s.cfg.Pattern, msg)
	if err != nil {
		return sink.Result{Outcome: sink.Dead, Err: err.Error()}
	}
	if s.cfg.Encrypt != nil {
		if body, err = s.cfg.Encrypt.Seal(body); err != nil {
			return sink.Result{Outcome: sink.Retry, Err: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	final := path.Join(s.cfg.Directory, name)
	err = s.conn.Do(ctx, func(c *sftp.Client) error { return s.put(c, final, body) })
	if err != nil {
		return sink.Result{Outcome: sink.Retry, Err: fmt.Sprintf("sftp %s: %v", s.cfg.Conn.Address, err),
			Timeout: errors.Is(err, context.DeadlineExceeded)}
	}
	return sink.Result{Outcome: sink.Delivered}
}

// put writes body to final (through a temporary name unless Direct) and
// checks the result by size.
func (s *SFTP) put(c *sftp.Client, final string, body []byte) error {
	target := final
	if !s.cfg.Direct {
		target = final + s.cfg.TempSuffix
	}
	if err := write(c, target, body); err != nil {
		return err
	}
	if !s.cfg.Direct {
		if _, ok := c.HasExtension("posix-rename@openssh.com"); ok && !s.plainRename {
			if err := c.PosixRename(target, final); err != nil {
				return fmt.Errorf("rename %s to %s: %w", path.Base(target), path.Base(final), err)
			}
		} else {
			// Plain SFTP rename refuses an existing target: a file left
			// by an earlier attempt is the same effect's, so it goes.
			if err := c.Remove(final); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", path.Base(final), err)
			}
			if err := c.Rename(target, final); err != nil {
				return fmt.Errorf("rename %s to %s: %w", path.Base(target), path.Base(final), err)
			}
		}
	}
	fi, err := c.Stat(final)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path.Base(final), err)
	}
	if fi.Size() != int64(len(body)) {
		return fmt.Errorf("%s holds %d bytes, want %d", path.Base(final), fi.Size(), len(body))
	}
	return nil
}

func write(c *sftp.Client, p string, body []byte) error {
	f, err := c.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("create %s: %w", path.Base(p), err)
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path.Base(p), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path.Base(p), err)
	}
	return nil
}
