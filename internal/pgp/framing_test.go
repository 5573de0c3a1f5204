package pgp

import (
	"bytes"
	"testing"
)

// TestFramingTellsCutFromWhole: a message of packets in both length
// formats, partial lengths included, is whole at its end and at each
// packet's end, and cut off at every other length; fed in pieces of any
// size the answer is the same.
func TestFramingTellsCutFromWhole(t *testing.T) {
	var msg bytes.Buffer
	var ends []int
	packet := func(head []byte, body int) {
		msg.Write(head)
		msg.Write(bytes.Repeat([]byte{0xAB}, body))
		ends = append(ends, msg.Len())
	}
	packet([]byte{0xC1, 12}, 12)                      // new format, one-octet length (tag 1)
	packet([]byte{0x85, 0x01, 0x10}, 0x110)           // old format, two-octet length (tag 1)
	packet([]byte{0xC2, 0xC0, 0x10}, 192+0x10)        // new format, two-octet length
	packet([]byte{0xCB, 0xFF, 0, 0, 0x01, 0x00}, 256) // new format, five-octet length
	// Partial lengths: 512 bytes, then 64, then a final 7.
	msg.Write([]byte{0xD2, 0xE9})
	msg.Write(bytes.Repeat([]byte{1}, 512))
	msg.Write([]byte{0xE6})
	msg.Write(bytes.Repeat([]byte{2}, 64))
	msg.Write([]byte{7})
	msg.Write(bytes.Repeat([]byte{3}, 7))
	ends = append(ends, msg.Len())
	packet([]byte{0xC3, 0}, 0) // an empty body
	b := msg.Bytes()
	whole := map[int]bool{}
	for _, e := range ends {
		whole[e] = true
	}
	for _, piece := range []int{1, 3, 4096} {
		for n := 0; n <= len(b); n++ {
			var f framing
			for i := 0; i < n; i += piece {
				f.Write(b[i:min(i+piece, n)])
			}
			if got := f.cutOff(); got == whole[n] {
				t.Fatalf("%d of %d bytes in pieces of %d: cut off %v", n, len(b), piece, got)
			}
		}
	}
	var f framing
	f.Write([]byte("ISA*00*"))
	if f.cutOff() {
		t.Error("bytes that are no OpenPGP framing taken for a cut-off message")
	}
}
