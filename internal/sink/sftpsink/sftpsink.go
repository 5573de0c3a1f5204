// Package sftpsink is the SFTP sink: each delivery becomes one file in a
// directory of a partner's SFTP server, an acknowledgment ediwatch sends
// (ack.999, ack.ta1) as its raw X12 (one interchange per file), every other
// kind as its CloudEvents JSON event.
//
// A file is uploaded under its final name plus a part that follows from
// the attempt and a temporary suffix (each upload its own, so two uploads
// of one row at once never write or rename each other's file; the next
// attempt removes the one a killed attempt left) and renamed into place with
// SFTP's rename, which never replaces a file. With Rename off (servers
// without RENAME) the final name is written directly. Either way the final
// name is deterministic from the effect, so a retry after a crash finds the
// same file and never leaves two; a file of other content under the name
// (two effects whose placeholders agree) is never replaced, and the
// delivery is retried until the partner has taken it. A delivery counts
// once the open file shows the size written and the rename (if any) took;
// the final name is not looked up afterwards, for a partner may take the
// file at once.
//
// Connections are made as the SFTP source makes them (internal/poller/sftp:
// known_hosts required, unknown host keys refused); one is shared by every
// relay worker and re-established after a failure.
package sftpsink

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"go.uber.org/zap"

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
	// TempSuffix ends the temporary name of an upload, the final name
	// plus 12 hex digits (default DefaultTempSuffix).
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
	// Log is told, once per name, of a temporary file left on the
	// partner's server because it may not be removed (default: nothing).
	Log *zap.Logger
}

// SFTP is an SFTP sink. It is safe for concurrent use.
type SFTP struct {
	cfg  Config
	conn *psftp.Source
	mu   sync.Mutex
	// leftovers are temporary files of failed uploads still to remove.
	leftovers map[string]struct{}
	// temps are the temporary names the folder held when last listed
	// (at tempsAt), for retries to find files killed attempts left.
	temps   map[string]bool
	tempsAt time.Time
	listing sync.Mutex // held while the folder is listed for temps
	// sealed keeps the message each effect was last sealed to (Encrypt),
	// in the order sealed: a retry uploads the same bytes, so it
	// recognises an earlier upload of its own (ours compares bytes, and
	// sealing again draws a new session key). Bounded by maxSealed.
	sealed      map[string][]byte
	sealedOrder []string
	sealedBytes int
	// hook, when set, is called at stages of an upload ("opened",
	// "written"), for tests of concurrent uploads.
	hook func(stage string)
	// stale are the temporary files the server refused to remove, each
	// reported once (bounded by maxLeftovers).
	stale map[string]struct{}
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
	if err := CheckNameLength(cfg.Pattern, cfg.TempSuffix, cfg.Direct); err != nil {
		return nil, fmt.Errorf("sink %s: name: %w", cfg.Name, err)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
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
// that holds {control} or {id}. Names of two effects may still agree
// (ISA13 is numbered per sender qualifier and id); the upload never
// replaces another effect's file.
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

// MaxNameBytes is the longest file name (one path element) SFTP servers'
// file systems take: 255 bytes on ext4, XFS, ZFS and NTFS. A longer name
// fails every upload (OpenSSH answers SSH_FX_BAD_MESSAGE or a failure).
const MaxNameBytes = 255

// tempExtra is how much longer than its final name an upload's temporary
// name is, before the suffix: a dot and 12 hex digits (tempName).
const tempExtra = 13

// longest are the longest values each placeholder takes from what
// ediwatch sends: an ack's ISA06/ISA08 (15) and ISA13 (9), GS06 and ST02
// (9 digits), an event's sender or receiver (qualifier, ':' and id: 18),
// its {control} (its {id}, 16 hex digits), the longest kind
// (payment.posted and claim.received).
var longest = map[string]int{"kind": len("claim.received"), "sender": 18, "receiver": 18, "control": 16,
	"group": 9, "set": 9, "id": 16, "ext": 4}

// CheckNameLength reports whether names under pattern p, rendered with
// the longest values its placeholders take, fit MaxNameBytes, with the
// temporary name's 13 bytes and tempSuffix unless direct (rename: false).
func CheckNameLength(p, tempSuffix string, direct bool) error {
	n := len(p)
	for _, ph := range placeholderRE.FindAllString(p, -1) {
		n += longest[strings.Trim(ph, "{}")] - len(ph)
	}
	what := "names"
	if !direct {
		n += tempExtra + len(tempSuffix)
		what = "temporary names (the name, 13 bytes and temp_suffix)"
	}
	if n > MaxNameBytes {
		return fmt.Errorf("%q makes %s of up to %d bytes; SFTP servers take at most %d", p, what, n, MaxNameBytes)
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
	if n := len(name) + s.tempBytes(); n > MaxNameBytes {
		// Values longer than CheckNameLength allows (partner data up to
		// safe's 64 bytes each): no server takes the name, ever.
		return sink.Result{Outcome: sink.Dead, Err: fmt.Sprintf("file name of %d bytes (%d with its temporary part) is longer than the %d bytes SFTP servers take; shorten the sink's name pattern",
			len(name), n, MaxNameBytes)}
	}
	if s.cfg.Encrypt != nil {
		if body, err = s.seal(msg.EffectKey, name, body); err != nil {
			return sink.Result{Outcome: sink.Retry, Err: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	final := path.Join(s.cfg.Directory, name)
	err = s.conn.Do(ctx, func(c *sftp.Client) error { return s.put(c, final, body, msg) })
	if err != nil {
		return sink.Result{Outcome: sink.Retry, Err: fmt.Sprintf("sftp %s: %v", s.cfg.Conn.Address, err),
			Timeout: errors.Is(err, context.DeadlineExceeded)}
	}
	return sink.Result{Outcome: sink.Delivered}
}

// maxSealed and maxSealedBytes bound the sealed messages kept for
// retries.
const (
	maxSealed      = 1000
	maxSealedBytes = 64 << 20
)

// seal returns body sealed to the partner: the message an earlier attempt
// of this effect sealed, when it had the same name and body, so that a
// retry after an upload done but not recorded finds its own file (or
// completes its own cut-off one) rather than a stranger's. The memory is
// this process's: after a restart such a file is taken for another
// effect's (ErrNameTaken) and left in place.
func (s *SFTP) seal(effect, name string, body []byte) ([]byte, error) {
	h := sha256.Sum256(body)
	k := effect + "\x00" + name + "\x00" + hex.EncodeToString(h[:])
	s.mu.Lock()
	b, ok := s.sealed[k]
	s.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := s.cfg.Encrypt.Seal(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.sealed[k]; ok {
		// A concurrent attempt sealed it first: one message for both.
		return prev, nil
	}
	if s.sealed == nil {
		s.sealed = map[string][]byte{}
	}
	for len(s.sealedOrder) > 0 && (len(s.sealedOrder) >= maxSealed || s.sealedBytes+len(b) > maxSealedBytes) {
		s.sealedBytes -= len(s.sealed[s.sealedOrder[0]])
		delete(s.sealed, s.sealedOrder[0])
		s.sealedOrder = s.sealedOrder[1:]
	}
	if len(b) <= maxSealedBytes {
		s.sealed[k] = b
		s.sealedOrder = append(s.sealedOrder, k)
		s.sealedBytes += len(b)
	}
	return b, nil
}

// tempBytes is how much longer than its final name an upload's
// temporary name is.
func (s *SFTP) tempBytes() int {
	if s.cfg.Direct {
		return 0
	}
	return tempExtra + len(s.cfg.TempSuffix)
}

// put writes body to final (through a temporary name unless Direct),
// checked by size while open. Removing temporary files is housekeeping:
// a server that refuses it (a read-only folder, a remove forbidden) does
// not fail the upload; the upload's own failure is what is returned.
func (s *SFTP) put(c *sftp.Client, final string, body []byte, msg sink.Message) error {
	target := final
	if !s.cfg.Direct {
		var err error
		if target, err = s.tempName(final, msg, msg.Attempt); err != nil {
			return err
		}
		if msg.Attempt > 1 {
			if err := s.removeEarlier(c, final, msg); err != nil {
				return err
			}
		}
	}
	s.removeLeftovers(c)
	created, err := s.upload(c, target, final, body)
	if err != nil {
		if target != final && created {
			s.removeTemp(c, target)
		}
		return err
	}
	return nil
}

// removeTemp removes the temporary file p of a failed upload: kept for
// the next connection when this one failed, left for an operator (said
// once) when the server refuses.
func (s *SFTP) removeTemp(c *sftp.Client, p string) {
	err := c.Remove(p)
	switch {
	case err == nil, errors.Is(err, os.ErrNotExist):
	case isStatus(err) || errors.Is(err, os.ErrPermission):
		s.staleTemp(p, err)
	default:
		s.leftover(p)
	}
}

// staleTemp reports, once per name, a temporary file the server refused
// to remove: it stays on the partner's server for an operator to remove.
func (s *SFTP) staleTemp(p string, err error) {
	s.mu.Lock()
	_, told := s.stale[p]
	if !told && len(s.stale) < maxLeftovers {
		if s.stale == nil {
			s.stale = map[string]struct{}{}
		}
		s.stale[p] = struct{}{}
	}
	s.mu.Unlock()
	if !told {
		s.cfg.Log.Warn("a temporary file stays on the partner's server: the server refused to remove it",
			zap.String("file", path.Base(p)), zap.String("directory", path.Dir(p)), zap.Error(err))
	}
}

// tempName is the temporary name of attempt of msg's upload to final: the
// final name, 12 hex digits and TempSuffix. Each upload has its own: two
// uploads of one row at once (a lease lapsed mid-upload) must not truncate
// or rename each other's file, or the final name would show a partial
// one, and the two holders of a row have different attempt numbers. The
// digits follow from the sink, the effect and the attempt, so the next
// attempt finds the file of one that was killed before its rename; an
// attempt of unknown number (0) draws them at random.
func (s *SFTP) tempName(final string, msg sink.Message, attempt int) (string, error) {
	var d [6]byte
	if attempt > 0 {
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", s.cfg.Name, msg.EffectKey, attempt))
		copy(d[:], h[:])
	} else if _, err := rand.Read(d[:]); err != nil {
		return "", err
	}
	return final + "." + hex.EncodeToString(d[:]) + s.cfg.TempSuffix, nil
}

// removeEarlier removes the temporary files earlier attempts of msg left
// beside final: an attempt killed between its upload and its rename left
// its file, and no one else knows its name. The attempt just before is
// removed by name; earlier ones (the attempt just before may never have
// reached the server: the partner down, a connect that failed) when the
// folder's listing shows them. The listing is taken at most every
// tempsTTL for the whole sink, not per retry: a recovery after an outage
// retries many rows at once, and a partner's folder may hold thousands of
// files. A file a killed attempt left is older than the process that
// retries it, or than tempsTTL. Only names of this sink's, this effect's
// earlier attempts are removed; a holder of one still uploading (its
// lease lapsed) loses its file and fails, as it must.
func (s *SFTP) removeEarlier(c *sftp.Client, final string, msg sink.Message) error {
	if err := s.listTemps(c, path.Dir(final)); err != nil {
		return err
	}
	for k := msg.Attempt - 1; k >= 1; k-- {
		p, _ := s.tempName(final, msg, k)
		s.mu.Lock()
		listed := s.temps[path.Base(p)]
		s.mu.Unlock()
		if k != msg.Attempt-1 && !listed {
			continue
		}
		err := c.Remove(p)
		switch {
		case err == nil, errors.Is(err, os.ErrNotExist):
		case isStatus(err) || errors.Is(err, os.ErrPermission):
			// Refused (a read-only folder answers so for a name that
			// is not there, too): the upload goes on under its own
			// name; a file known to be there is left for an operator.
			if listed {
				s.staleTemp(p, err)
			}
		default:
			return fmt.Errorf("remove %s: %w", path.Base(p), err)
		}
		s.mu.Lock()
		delete(s.temps, path.Base(p))
		s.mu.Unlock()
	}
	return nil
}

// tempsTTL is how long a listing of the folder's temporary names serves.
const tempsTTL = 10 * time.Minute

// listTemps lists the temporary names dir holds into temps, unless the
// last listing is younger than tempsTTL. A folder that may not be listed
// (a write-only drop box) gives none.
func (s *SFTP) listTemps(c *sftp.Client, dir string) error {
	// One listing at a time: the workers retrying at once after an
	// outage wait for the first one's instead of each listing the folder.
	s.listing.Lock()
	defer s.listing.Unlock()
	s.mu.Lock()
	fresh := s.temps != nil && time.Since(s.tempsAt) < tempsTTL
	s.mu.Unlock()
	if fresh {
		return nil
	}
	fis, err := c.ReadDir(dir)
	if err != nil && !isStatus(err) && !errors.Is(err, os.ErrPermission) && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	temps := map[string]bool{}
	for _, fi := range fis {
		if strings.HasSuffix(fi.Name(), s.cfg.TempSuffix) {
			temps[fi.Name()] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.temps, s.tempsAt = temps, time.Now()
	return nil
}

// isStatus reports whether err is the server's answer (the connection
// stands).
func isStatus(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se)
}

// maxLeftovers bounds the temporary files kept for removal.
const maxLeftovers = 1000

// leftover remembers a temporary file a failed upload could not remove
// (its connection lost), for removal over the next connection.
func (s *SFTP) leftover(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leftovers == nil {
		s.leftovers = map[string]struct{}{}
	}
	if len(s.leftovers) < maxLeftovers {
		s.leftovers[p] = struct{}{}
	}
}

// removeLeftovers removes the temporary files of failed uploads.
func (s *SFTP) removeLeftovers(c *sftp.Client) {
	s.mu.Lock()
	var ps []string
	for p := range s.leftovers {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	for _, p := range ps {
		// Kept only while the connection fails; a server's answer (gone,
		// or a folder that refuses deletes) is final.
		err := c.Remove(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !isStatus(err) && !errors.Is(err, os.ErrPermission) {
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			s.staleTemp(p, err)
		}
		s.mu.Lock()
		delete(s.leftovers, p)
		s.mu.Unlock()
	}
}

// upload writes body to target and renames it to final (when they
// differ); created reports whether target was created, so that a failed
// upload removes only a file it made.
func (s *SFTP) upload(c *sftp.Client, target, final string, body []byte) (created bool, _ error) {
	if target == final {
		// rename: false writes the final name directly: an earlier
		// upload of this effect may have left part of it there, but
		// another effect's file under the same name stays.
		if fi, err := c.Lstat(final); err == nil && fi.Size() > 0 {
			if err := s.ours(c, final, fi.Size(), body, true); err != nil {
				return false, err
			}
		}
	}
	created, err := s.write(c, target, body)
	if err != nil {
		return created, err
	}
	if target != final {
		// SFTP's rename (version 3, as OpenSSH serves it) refuses an
		// existing target, so it never replaces a file: one standing
		// under the final name is this effect's own (an upload done but
		// not recorded, or a second worker's), or another effect's
		// under the same name, which must not be lost.
		err := c.Rename(target, final)
		if err == nil && s.hook != nil {
			s.hook("renamed")
		}
		if err != nil {
			fi, serr := c.Lstat(final)
			if serr != nil {
				return true, fmt.Errorf("rename %s to %s: %w", path.Base(target), path.Base(final), err)
			}
			if err := s.ours(c, final, fi.Size(), body, false); err != nil {
				return true, err
			}
			s.removeTemp(c, target)
			return true, nil
		}
	}
	// The file was checked by size while open and is in place now; a
	// look at the final name could find it gone already (the partner's
	// poller, or a server that moves files away once closed), and a
	// retry would deliver it twice.
	return true, nil
}

// ErrNameTaken reports a final name that holds another effect's file.
var ErrNameTaken = errors.New("holds another file")

// ours reports whether the file p of size bytes is body (or, with
// partial, a beginning of it, as a cut direct upload leaves), that is an
// upload of this effect; another file under the name is ErrNameTaken
// (wrapping os.ErrExist: the server answered, the connection stays). A
// file the user may not read is not known to be ours: the error is
// retried (a copy sent twice once the partner took it, rather than a lost
// one).
func (s *SFTP) ours(c *sftp.Client, p string, size int64, body []byte, partial bool) error {
	fits := size == int64(len(body)) || partial && size < int64(len(body))
	taken := fmt.Errorf("%s %w (%d bytes), left in place: two effects under one name (put {id} in the pattern); retried until the partner takes it: %w",
		path.Base(p), ErrNameTaken, size, os.ErrExist)
	if !fits {
		return taken
	}
	f, err := c.Open(p)
	if err != nil {
		return fmt.Errorf("open %s: %w", path.Base(p), err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(len(body))+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", path.Base(p), err)
	}
	if bytes.Equal(b, body) || partial && len(b) < len(body) && bytes.Equal(b, body[:len(b)]) {
		return nil
	}
	return taken
}

func (s *SFTP) write(c *sftp.Client, p string, body []byte) (created bool, _ error) {
	f, err := c.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", path.Base(p), err)
	}
	if s.hook != nil {
		s.hook("opened")
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return true, fmt.Errorf("write %s: %w", path.Base(p), err)
	}
	// The size is checked on the open file (fstat, or a stat of its name
	// where the server has no fstat), before anyone may take it.
	fi, err := f.Stat()
	if err != nil {
		fi, err = c.Stat(p)
	}
	if err != nil {
		f.Close()
		return true, fmt.Errorf("stat %s: %w", path.Base(p), err)
	}
	if fi.Size() != int64(len(body)) {
		f.Close()
		return true, fmt.Errorf("%s holds %d bytes, want %d", path.Base(p), fi.Size(), len(body))
	}
	if err := f.Close(); err != nil {
		return true, fmt.Errorf("close %s: %w", path.Base(p), err)
	}
	if s.hook != nil {
		s.hook("written")
	}
	return true, nil
}
