package process

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/x12/ack"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// TestTransientChangesNothingOfMixedFiles: Config.Transient, with sets
// marked Unknown, Claimed and ClaimedClean in turn (Config.Claims),
// changes nothing emit sees of a file mixing an 837 of sixty claims, the
// same set rejected for one bad amount, 837s of one and three claims, an
// 835 set rejected mid-group between two processed ones, a received 999,
// a 277CA and the first 837 again (under other control numbers): every set (status, reason, problems, document, effects and
// their payloads) and every acknowledgment, taken while emit runs, is
// what processing without Transient shows.
func TestTransientChangesNothingOfMixedFiles(t *testing.T) {
	gen := func(c x12gen.Claims) string {
		var b bytes.Buffer
		if err := c.Write(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	big := gen(x12gen.Claims{Control: 11, Claims: 60, IDPrefix: "A-LONGER-CLAIM-ID-"})
	badAmount := strings.Replace(gen(x12gen.Claims{Control: 12, Claims: 60, IDPrefix: "A-LONGER-CLAIM-ID-"}),
		"A-LONGER-CLAIM-ID-7*150.00", "A-LONGER-CLAIM-ID-7*15O.00", 1)
	if !strings.Contains(badAmount, "15O.00") {
		t.Fatal("the amount edit did not apply")
	}
	good := string(readFixture(t, "835_canonical.x12"))
	st, se := strings.Index(good, "ST*835*0001"), strings.Index(good, "GE*")
	set := good[st:se]
	bad := strings.NewReplacer("ST*835*0001", "ST*835*0002", "SE*19*0001", "SE*18*0002").Replace(set)
	bad = bad[:strings.Index(bad, "BPR*")] + bad[strings.Index(bad, "TRN*"):]
	second := strings.NewReplacer("ST*835*0001", "ST*835*0003", "SE*19*0001", "SE*19*0003", "EFT0001", "EFT0003").Replace(set)
	rejectedMidway := good[:se] + bad + second + strings.Replace(good[se:], "GE*1*", "GE*3*", 1)
	received999 := string(fix999(ack999("7001", "AK2*837*0001*005010X222A1~IK5*A~AK2*837*0002*005010X222A1~"+
		"IK3*CLM*9**8~CTX*CLM01:PCN-2~IK4*2*782*1~IK5*R*5~", "1")))
	file := []byte(big + badAmount + gen(x12gen.Claims{Control: 13, Claims: 1, IDPrefix: "S"}) + rejectedMidway +
		received999 + string(provider277("7101", "BATCHA")) + gen(x12gen.Claims{Control: 14, Claims: 3, IDPrefix: "M"}) +
		gen(x12gen.Claims{Control: 15, Claims: 60, IDPrefix: "A-LONGER-CLAIM-ID-"}))

	process := func(transient bool, marks []Known) ([]taken, []Effect) {
		cfg := Config{ControlNumbers: &ack.MemoryControlNumbers{Start: 900}, Ack: ack.Options{Now: fixedNow},
			Transient: transient}
		if marks != nil {
			cfg.Claims = func(context.Context, []string) (func(*envelope.Set) Known, error) {
				i := 0
				return func(*envelope.Set) Known {
					i++
					return marks[(i-1)%len(marks)]
				}, nil
			}
		}
		return takeAll(t, file, cfg)
	}
	for _, marks := range [][]Known{nil, {Unknown, Claimed}, {Claimed, Unknown, ClaimedClean, Unknown}} {
		want, wantAcks := process(false, marks)
		got, gotAcks := process(true, marks)
		if !reflect.DeepEqual(wantAcks, gotAcks) {
			t.Errorf("marks %v: acknowledgments differ:\n%+v\n%+v", marks, wantAcks, gotAcks)
		}
		if len(want) != len(got) || len(want) != 10 {
			t.Fatalf("marks %v: %d sets, %d transient; want 10", marks, len(want), len(got))
		}
		rejected, effects := 0, 0
		for i := range want {
			if !reflect.DeepEqual(want[i], got[i]) {
				t.Errorf("marks %v, set %d differs:\n%+v\n%+v", marks, i, want[i], got[i])
			}
			if want[i].set.Status == Rejected {
				rejected++
			}
			effects += len(want[i].set.Effects)
		}
		if marks == nil && (rejected != 2 || effects != 60+1+2+2+2+3+60) {
			t.Errorf("%d sets rejected, %d effects: the file is not what the test means", rejected, effects)
		}
	}
}
