// Package pgp opens the OpenPGP messages partners put on their drops and
// seals the files ediwatch sends back, with github.com/ProtonMail/go-crypto.
//
// A Decrypter decrypts (and, given the partner's key, verifies) a message
// as a stream: memory stays bounded whatever the file's size. go-crypto
// checks a signature (and the integrity tag) only once the whole body has
// been read, so the plaintext goes to an unlinked spool file first and is
// handed on only after every check has passed (Decrypter.Spool): nothing is
// ever parsed, let alone recorded, from a message that fails them.
//
// Keys and passphrases come from files; neither they nor any plaintext
// appear in an error.
package pgp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/ediwatch/ediwatch/internal/secretfile"
)

// Reasons a file is refused; they label the metric
// ediwatch_files_decrypt_failed_total.
const (
	// ReasonWrongKey: encrypted, but to none of our keys.
	ReasonWrongKey = "wrong_key"
	// ReasonCorrupt: not a readable OpenPGP message (damaged packets,
	// armor or integrity tag, a cut-off upload, an unsupported algorithm).
	ReasonCorrupt = "corrupt"
	// ReasonUnsigned: verify_key_file is set and the message carries no
	// signature, or the file is plaintext (not an OpenPGP message).
	ReasonUnsigned = "unsigned"
	// ReasonBadSignature: signed by the partner's key, but the signature
	// does not verify (altered content, a revoked key, an expired
	// signature). A signature made while the key was valid stays good
	// after the key expired, as GnuPG has it, with a warning.
	ReasonBadSignature = "bad_signature"
	// ReasonKeyExpired: signed by the partner's key at a time the key had
	// already expired.
	ReasonKeyExpired = "key_expired"
	// ReasonUnknownSigner: signed, by a key other than verify_key_file's.
	ReasonUnknownSigner = "unknown_signer"
	// ReasonNotEncrypted: plaintext (or a message signed but not
	// encrypted) on a source with require_encryption.
	ReasonNotEncrypted = "not_encrypted"
	// ReasonTooLarge: the plaintext outgrows the cap (Limit): a
	// compression bomb, or a file beyond max_file_size once opened.
	ReasonTooLarge = "too_large"
)

// DefaultMaxPlaintext caps a message's plaintext unless Limit says
// otherwise: max_file_size's default.
const DefaultMaxPlaintext int64 = 1 << 30

// Reasons lists every reason, for metrics initialisation and docs.
func Reasons() []string {
	return []string{ReasonWrongKey, ReasonCorrupt, ReasonUnsigned, ReasonBadSignature, ReasonKeyExpired,
		ReasonUnknownSigner, ReasonNotEncrypted, ReasonTooLarge}
}

var reasonText = map[string]string{
	ReasonWrongKey:      "OpenPGP message encrypted to a key that is not ours",
	ReasonCorrupt:       "corrupt OpenPGP message",
	ReasonUnsigned:      "OpenPGP message not signed, and verify_key_file requires a signature",
	ReasonBadSignature:  "OpenPGP signature does not verify",
	ReasonKeyExpired:    "OpenPGP message signed after the partner's key expired",
	ReasonUnknownSigner: "OpenPGP message signed by a key other than verify_key_file's",
	ReasonNotEncrypted:  "not an encrypted OpenPGP message, and the source has require_encryption",
	ReasonTooLarge:      "OpenPGP plaintext larger than the cap (max_file_size)",
}

// Error is a file refused for Reason. Err, when set, is go-crypto's own
// error: it names packets and key ids, never key material or content.
type Error struct {
	Reason string
	Err    error
	// CutOff marks a corrupt message that ended early: every byte of the
	// file was read and the message wanted more, as an upload still under
	// way or stalled leaves it. Damage inside it (a failed integrity
	// check, a bad packet, garbled compressed data) is not cut off.
	CutOff bool
}

func (e *Error) Error() string {
	if e.Err == nil {
		return reasonText[e.Reason]
	}
	return reasonText[e.Reason] + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the reason of a refusal, "" for any other error (an
// I/O failure writing the spool: worth another attempt).
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// IsCutOff reports whether err refuses a message that ended early (see
// Error.CutOff), which a later poll may find complete.
func IsCutOff(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.CutOff
}

const armorHeader = "-----BEGIN PGP MESSAGE-----"

// IsMessage reports whether head, the first bytes of a file (64 are
// plenty), starts an OpenPGP message: ASCII armor of type PGP MESSAGE
// (after optional white space), or a binary packet header whose tag can
// open a message. X12 never does: it starts with ISA (or a byte-order
// mark, white space), none of which has the high bit a packet header
// needs, and the mark's 0xEF is no message tag.
func IsMessage(head []byte) bool {
	t := bytes.TrimLeft(head, " \t\r\n")
	if bytes.HasPrefix(t, []byte(armorHeader)) {
		return true
	}
	if len(head) == 0 || head[0]&0x80 == 0 {
		return false
	}
	var tag byte
	if head[0]&0x40 != 0 {
		tag = head[0] & 0x3f // new format
	} else {
		tag = (head[0] >> 2) & 0x0f // old format
	}
	switch tag {
	case 1, 3: // a session key, public-key or passphrase encrypted
	case 4: // one-pass signature
	case 8: // compressed data
	case 9, 18, 20: // encrypted data (integrity-protected or not, AEAD)
	case 10, 11: // marker, literal data
	default:
		return false
	}
	return true
}

// readKeys reads the keys in the file at path, armored or binary.
func readKeys(what, path string) (openpgp.EntityList, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var el openpgp.EntityList
	if bytes.Contains(b[:min(len(b), 1024)], []byte("-----BEGIN PGP")) {
		el, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	} else {
		el, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: not an OpenPGP key: %w", what, path, err)
	}
	if len(el) == 0 {
		return nil, fmt.Errorf("%s %s: no OpenPGP key", what, path)
	}
	return el, nil
}

// readPrivateKeys reads private keys and unlocks them with the passphrase
// in passphraseFile (its first line; none when the path is empty).
func readPrivateKeys(what, path, passphraseFile string) (openpgp.EntityList, error) {
	el, err := readKeys(what, path)
	if err != nil {
		return nil, err
	}
	var pass []byte
	if passphraseFile != "" {
		b, err := secretfile.Read(passphraseFile)
		if err != nil {
			return nil, fmt.Errorf("passphrase_file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		pass = []byte(strings.TrimSuffix(line, "\r"))
	}
	for _, e := range el {
		if e.PrivateKey == nil {
			return nil, fmt.Errorf("%s %s: holds a public key only", what, path)
		}
		if err := e.DecryptPrivateKeys(pass); err != nil {
			// go-crypto says "private key checksum failure" or the like:
			// no secret in it.
			return nil, fmt.Errorf("%s %s: unlock with passphrase_file: %w", what, path, err)
		}
	}
	return el, nil
}

// DecryptFiles names a source's key files.
type DecryptFiles struct {
	// PrivateKeyFile holds our private key(s), armored or binary.
	PrivateKeyFile string
	// PassphraseFile, when set, holds the passphrase of PrivateKeyFile.
	PassphraseFile string
	// VerifyKeyFile, when set, holds the partner's public key(s): every
	// message must then be signed by one of them.
	VerifyKeyFile string
}

// Decrypter opens the OpenPGP messages of one source. It is immutable and
// safe for concurrent use.
type Decrypter struct {
	ring    openpgp.EntityList // ours, then the partner's
	verify  openpgp.EntityList // nil: signatures are not required
	require bool
	max     int64 // plaintext cap, bytes
}

// NewDecrypter reads the keys (unlocking ours). With require, a file that
// is not an encrypted message is refused (ReasonNotEncrypted).
func NewDecrypter(f DecryptFiles, require bool) (*Decrypter, error) {
	if f.PrivateKeyFile == "" {
		return nil, errors.New("decrypt.private_key_file: must be set")
	}
	ours, err := readPrivateKeys("decrypt.private_key_file", f.PrivateKeyFile, f.PassphraseFile)
	if err != nil {
		return nil, err
	}
	d := &Decrypter{ring: append(openpgp.EntityList{}, ours...), require: require,
		max: DefaultMaxPlaintext}
	if f.VerifyKeyFile != "" {
		if d.verify, err = readKeys("decrypt.verify_key_file", f.VerifyKeyFile); err != nil {
			return nil, err
		}
		d.ring = append(d.ring, d.verify...)
	}
	return d, nil
}

// Limit returns a copy of d that refuses (ReasonTooLarge) a message
// whose plaintext passes max bytes (DefaultMaxPlaintext when max <= 0):
// no more than max+1 bytes are ever decompressed or written.
func (d *Decrypter) Limit(max int64) *Decrypter {
	c := *d
	if max <= 0 {
		max = DefaultMaxPlaintext
	}
	c.max = max
	return &c
}

// Require reports whether plaintext is refused.
func (d *Decrypter) Require() bool { return d.require }

// Decrypt writes the plaintext of the message src (binary or armored) to
// dst, reading it as a stream in bounded memory. It returns an *Error for
// a message refused (see the Reason constants); a failure to write dst is
// returned as it is. When the error is a refusal found at the end (a bad
// signature, a damaged integrity tag), dst has received plaintext that
// must not be used: the caller discards it.
func (d *Decrypter) Decrypt(dst io.Writer, src io.Reader) error { return d.DecryptWarn(dst, src, nil) }

// DecryptWarn is Decrypt that tells warn (when set) what a file's
// decryption found worth reporting but not refusing: a signature made
// while the partner's key was valid, the key expired since.
func (d *Decrypter) DecryptWarn(dst io.Writer, src io.Reader, warn func(string)) error {
	br := bufio.NewReaderSize(src, 64<<10)
	// The packets' framing is followed as they are read, so that a message
	// that cannot be read is told cut off (the file ends inside its last
	// packet, or inside its armor) from damaged (whole, but a packet or
	// an integrity check fails): the rest of the file is read for that.
	var (
		frame     framing
		raw, body io.Reader
	)
	corrupt := func(err error) *Error {
		rest := body // what the message read, the framing followed
		if rest == nil {
			rest = io.TeeReader(raw, &frame)
		}
		_, derr := io.Copy(io.Discard, rest)
		cut := frame.cutOff() || derr != nil && (errors.Is(derr, io.ErrUnexpectedEOF) || errors.Is(derr, io.EOF))
		return &Error{Reason: ReasonCorrupt, Err: err, CutOff: cut}
	}
	head, _ := br.Peek(64)
	if !IsMessage(head) {
		if err := d.refusePlaintext(); err != nil {
			return err
		}
		return &Error{Reason: ReasonCorrupt, Err: errors.New("not an OpenPGP message")}
	}
	raw = br
	if bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte(armorHeader)) {
		blk, err := armor.Decode(br)
		if err != nil {
			return corrupt(err)
		}
		if blk.Type != "PGP MESSAGE" {
			return &Error{Reason: ReasonCorrupt, Err: fmt.Errorf("armor of type %q", blk.Type)}
		}
		raw = blk.Body
	}
	body = io.TeeReader(raw, &frame)
	// Compressed data is read through go-crypto's own cap too, so a bomb
	// stops inflating past it (with room for the literal packet's header:
	// the exact cap is applied to the plaintext below).
	limit := d.max + 64<<10
	md, err := openpgp.ReadMessage(body, d.ring, nil, &packet.Config{MaxDecompressedMessageSize: &limit})
	switch {
	case errors.Is(err, pgperrors.ErrKeyIncorrect):
		return &Error{Reason: ReasonWrongKey, Err: err}
	case err != nil:
		return corrupt(err)
	case d.require && !md.IsEncrypted:
		return &Error{Reason: ReasonNotEncrypted}
	case d.verify != nil && !md.IsSigned:
		return &Error{Reason: ReasonUnsigned}
	case d.verify != nil && (md.SignedBy == nil || !holds(d.verify, md.SignedBy.Entity)):
		return &Error{Reason: ReasonUnknownSigner, Err: fmt.Errorf("signer key id %016X", md.SignedByKeyId)}
	case d.verify != nil && md.SignatureError != nil:
		// Known before the body: an unsupported hash, say.
		if err := signatureRefusal(md, warn); err != nil {
			return err
		}
	}
	w := &errWriter{w: dst}
	n, err := io.Copy(w, io.LimitReader(md.UnverifiedBody, d.max+1))
	if err != nil {
		if w.err != nil {
			return fmt.Errorf("decrypt: write plaintext: %w", w.err)
		}
		if errors.Is(err, pgperrors.ErrMessageTooLarge) {
			return &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("over %d bytes", d.max)}
		}
		return corrupt(err)
	}
	if n > d.max {
		return &Error{Reason: ReasonTooLarge, Err: fmt.Errorf("over %d bytes", d.max)}
	}
	if d.verify != nil {
		if md.Signature == nil && md.SignatureError == nil {
			return &Error{Reason: ReasonUnsigned}
		}
		if err := signatureRefusal(md, warn); err != nil {
			return err
		}
	}
	return nil
}

// signatureRefusal returns the refusal of md's signature (md.Signature
// or md.SignatureError set), nil when it is good. go-crypto judges the
// signing key's expiry at the time of reading; GnuPG, at the time of the
// signature ("Good signature ... [expired]"), and so does ediwatch: a
// signature that verifies, made while the key was valid, is good, and warn
// is told that the key has expired since. One made after the key expired
// is refused as key_expired; one made before the key existed, as
// bad_signature. The time is the signer's own claim: whoever holds an
// expired key can date a signature back, as with GnuPG; a retired key is
// revoked (revocation counts at the time of reading), not left to expire.
func signatureRefusal(md *openpgp.MessageDetails, warn func(string)) error {
	err := md.SignatureError
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgperrors.ErrKeyExpired) || md.Signature == nil || md.SignedBy == nil ||
		md.SignedBy.Entity == nil {
		return &Error{Reason: ReasonBadSignature, Err: err}
	}
	// go-crypto checks revocation before expiry, and the cryptographic
	// signature before both: ErrKeyExpired means both passed.
	at, key := md.Signature.CreationTime, md.SignedBy
	if at.Before(key.PublicKey.CreationTime) {
		return &Error{Reason: ReasonBadSignature, Err: fmt.Errorf("signature of %s older than key %016X",
			at.UTC().Format(time.RFC3339), key.PublicKey.KeyId)}
	}
	self, _ := key.Entity.PrimarySelfSignature()
	bySubkey := key.PublicKey != key.Entity.PrimaryKey
	if key.Entity.PrimaryKey.KeyExpired(self, at) || self != nil && self.SigExpired(at) ||
		bySubkey && key.SelfSignature != nil && (key.PublicKey.KeyExpired(key.SelfSignature, at) || key.SelfSignature.SigExpired(at)) {
		return &Error{Reason: ReasonKeyExpired, Err: fmt.Errorf("signed %s, after key %016X expired",
			at.UTC().Format(time.RFC3339), key.PublicKey.KeyId)}
	}
	if md.Signature.SigExpired(time.Now()) {
		return &Error{Reason: ReasonBadSignature, Err: pgperrors.ErrSignatureExpired}
	}
	if warn != nil {
		warn(fmt.Sprintf("OpenPGP signature by key %016X made %s, while the key was valid; the key has expired since",
			key.PublicKey.KeyId, at.UTC().Format(time.RFC3339)))
	}
	return nil
}

// refusePlaintext returns the refusal of a file that is no OpenPGP
// message, nil when plaintext is accepted: not with require_encryption,
// nor with verify_key_file (plaintext is unsigned; a cleartext-signed
// file is not verified either), else dropping plain X12 on the folder
// would pass round the signature the source requires.
func (d *Decrypter) refusePlaintext() error {
	switch {
	case d.require:
		return &Error{Reason: ReasonNotEncrypted}
	case d.verify != nil:
		return &Error{Reason: ReasonUnsigned, Err: errors.New("plaintext, not an OpenPGP message")}
	}
	return nil
}

// holds reports whether list holds the entity e (by primary key).
func holds(list openpgp.EntityList, e *openpgp.Entity) bool {
	if e == nil || e.PrimaryKey == nil {
		return false
	}
	for _, x := range list {
		if x.PrimaryKey != nil && bytes.Equal(x.PrimaryKey.Fingerprint, e.PrimaryKey.Fingerprint) {
			return true
		}
	}
	return false
}

// errWriter remembers the error of its writer, to tell a failure to
// write the plaintext from a failure to read the message.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	n, err := e.w.Write(b)
	if err != nil {
		e.err = err
	}
	return n, err
}

// Spool returns the plaintext of the file f, rewound, and its size: f
// itself when it is not an OpenPGP message (unless plaintext is refused:
// require_encryption, verify_key_file),
// else a new temporary file in dir (the system's when empty), unlinked
// at once, holding the plaintext of f once decrypted and, as configured,
// verified. The caller closes a returned file other than f; on error
// there is none. f is read from its current offset. Cancelling ctx stops
// the decryption with ctx's error (not a refusal).
func (d *Decrypter) Spool(ctx context.Context, f *os.File, dir string) (*os.File, int64, error) {
	return d.SpoolWarn(ctx, f, dir, nil)
}

// SpoolWarn is Spool that tells warn (when set) what DecryptWarn does.
func (d *Decrypter) SpoolWarn(ctx context.Context, f *os.File, dir string, warn func(string)) (*os.File, int64, error) {
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, fmt.Errorf("decrypt: %w", err)
	}
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, 0, fmt.Errorf("decrypt: %w", err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("decrypt: %w", err)
	}
	if !IsMessage(head[:n]) {
		if err := d.refusePlaintext(); err != nil {
			return nil, 0, err
		}
		end, err := f.Seek(0, io.SeekEnd)
		if err == nil {
			_, err = f.Seek(start, io.SeekStart)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("decrypt: %w", err)
		}
		return f, end - start, nil
	}
	pt, err := os.CreateTemp(dir, "ediwatch-plain-*")
	if err != nil {
		return nil, 0, fmt.Errorf("decrypt: spool: %w", err)
	}
	// Unlinked now: the plaintext lives only as long as this descriptor.
	if err := os.Remove(pt.Name()); err != nil {
		pt.Close()
		return nil, 0, fmt.Errorf("decrypt: spool: %w", err)
	}
	bw := bufio.NewWriterSize(pt, 256<<10)
	err = d.DecryptWarn(bw, ctxReader{ctx, f}, warn)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		size, err = pt.Seek(0, io.SeekCurrent)
	}
	if err == nil {
		_, err = pt.Seek(0, io.SeekStart)
	}
	if err != nil {
		pt.Close()
		return nil, 0, err
	}
	return pt, size, nil
}

// ctxReader fails its reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// SignFiles names our signing key's files.
type SignFiles struct {
	PrivateKeyFile string
	PassphraseFile string
}

// Encrypter seals the files sent to one partner: encrypted to their key
// and, when configured, signed with ours. It is immutable and safe for
// concurrent use.
type Encrypter struct {
	to     openpgp.EntityList
	signer *openpgp.Entity
}

// NewEncrypter reads the partner's public key file and, when
// sign.PrivateKeyFile is set, our signing key.
func NewEncrypter(publicKeyFile string, sign SignFiles) (*Encrypter, error) {
	to, err := readKeys("encrypt_to", publicKeyFile)
	if err != nil {
		return nil, err
	}
	e := &Encrypter{to: to}
	if sign.PrivateKeyFile != "" {
		el, err := readPrivateKeys("sign_with.private_key_file", sign.PrivateKeyFile, sign.PassphraseFile)
		if err != nil {
			return nil, err
		}
		e.signer = el[0]
	}
	return e, nil
}

// Seal returns body as a binary OpenPGP message to the partner.
func (e *Encrypter) Seal(body []byte) ([]byte, error) {
	var out bytes.Buffer
	w, err := openpgp.Encrypt(&out, e.to, e.signer, &openpgp.FileHints{IsBinary: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return out.Bytes(), nil
}
