package pgp

import "encoding/binary"

// framing follows the outer packet framing of an OpenPGP message (RFC
// 9580 section 4.2: a tag octet, then the body's length in the old or new
// format, partial lengths included) over the bytes written to it, without
// keeping them. It tells a message cut off (the bytes end inside a
// packet) from one whose packets are whole but damaged inside.
type framing struct {
	state   frameState
	buf     [5]byte // length octets read so far
	n       int
	need    int // old format: length octets
	left    int64
	partial bool
	packets int
}

type frameState int

const (
	frameTag    frameState = iota // before a packet's tag octet
	frameNewLen                   // inside a new-format length
	frameOldLen                   // inside an old-format length
	frameBody                     // inside a body (or a partial chunk)
	frameToEnd                    // an old-format packet of indeterminate length
	frameBad                      // not OpenPGP framing: no conclusion
)

// Write implements io.Writer; it never fails.
func (f *framing) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		switch f.state {
		case frameTag:
			c := b[0]
			b = b[1:]
			switch {
			case c&0x80 == 0:
				f.state = frameBad
			case c&0x40 != 0:
				f.state, f.n = frameNewLen, 0
			case c&3 == 3:
				f.state = frameToEnd
			default:
				f.state, f.n, f.need = frameOldLen, 0, 1<<(c&3)
			}
			f.packets++
		case frameNewLen:
			f.buf[f.n] = b[0]
			f.n++
			b = b[1:]
			first := f.buf[0]
			switch {
			case first < 192:
				f.body(int64(first), false)
			case first < 224:
				if f.n == 2 {
					f.body((int64(first)-192)<<8+int64(f.buf[1])+192, false)
				}
			case first == 255:
				if f.n == 5 {
					f.body(int64(binary.BigEndian.Uint32(f.buf[1:5])), false)
				}
			default:
				f.body(1<<(first&0x1f), true)
			}
		case frameOldLen:
			f.buf[f.n] = b[0]
			f.n++
			b = b[1:]
			if f.n == f.need {
				var l int64
				for _, c := range f.buf[:f.n] {
					l = l<<8 | int64(c)
				}
				f.body(l, false)
			}
		case frameBody:
			k := min(int64(len(b)), f.left)
			b = b[k:]
			f.left -= k
			if f.left == 0 {
				f.next()
			}
		default: // frameToEnd, frameBad: the rest says nothing more
			return total, nil
		}
	}
	return total, nil
}

// body starts a body (or partial chunk) of l bytes.
func (f *framing) body(l int64, partial bool) {
	f.state, f.left, f.partial = frameBody, l, partial
	if l == 0 {
		f.next()
	}
}

// next follows the end of a body or chunk: another length after a
// partial chunk, else the next packet.
func (f *framing) next() {
	if f.partial {
		f.state, f.n = frameNewLen, 0
		return
	}
	f.state = frameTag
}

// cutOff reports whether the bytes written end inside a packet, or
// before any, or may: inside an old-format packet of indeterminate
// length (what `gpg --sign` writes), which any length completes.
func (f *framing) cutOff() bool {
	switch f.state {
	case frameNewLen, frameOldLen, frameBody, frameToEnd:
		return true
	case frameTag:
		return f.packets == 0
	}
	return false
}
