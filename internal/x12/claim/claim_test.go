package claim

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/envelope"
	"github.com/ediwatch/ediwatch/internal/testenv"
	"github.com/ediwatch/ediwatch/internal/x12"
)

var update = flag.Bool("update", false, "rewrite golden files")

func claimsOf(t *testing.T, data []byte) ([]Claim, []x12.Problem) {
	t.Helper()
	rd := envelope.NewReader(bytes.NewReader(data), envelope.Options{KeepSegments: true})
	var all []Claim
	var probs []x12.Problem
	for {
		k, err := rd.Next()
		if err == io.EOF {
			return all, probs
		}
		if err != nil {
			t.Fatal(err)
		}
		if k == envelope.KindSet && rd.Set().Type == "837" {
			c, p := Parse(rd.Set().Segments())
			all, probs = append(all, c...), append(probs, p...)
		}
	}
}

func TestCorpusClaims(t *testing.T) {
	dir := testenv.Corpus(t)
	for _, tc := range []struct {
		file   string
		claims int
		kind   string
		total  string
	}{
		{"linuxforhealth-x12/demo.example1.837", 1, "professional", "100.00"},
		{"linuxforhealth-x12/institutional-claim.837i", 1, "institutional", "89.93"},
		{"linuxforhealth-x12/two-claims-single-provider.837i", 2, "institutional", "139.95"},
		{"stupidedi/837I-X223A2-two-claims-for-the-same-provider.edi", 2, "institutional", "139.95"},
		{"moov-io-x12/example_5010_837p-sample.txt", 8, "professional", "1771.96"},
		{"staedi/sample837-original.edi", 1, "professional", "5332.54"},
		{"uhin-x12-parser-library/837.edi", 1, "professional", "2.00"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			claims, probs := claimsOf(t, data)
			if len(probs) != 0 {
				t.Errorf("problems %v", probs)
			}
			if s := Summarize(claims); s.Claims != tc.claims || s.TotalCharge.String() != tc.total {
				t.Errorf("summary %+v, want %d claims totalling %s", s, tc.claims, tc.total)
			}
			for _, c := range claims {
				if c.Kind != tc.kind || c.ClaimID == "" || c.BillingProvider.NPI == "" || len(c.Lines) == 0 {
					t.Errorf("claim %+v", c)
				}
				var lines x12.Money
				for _, l := range c.Lines {
					lines = lines.Add(l.Charge)
				}
				if !lines.Equal(c.TotalCharge) {
					t.Errorf("claim %s: lines sum to %s, CLM02 %s", c.ClaimID, lines, c.TotalCharge)
				}
			}
			got, _ := json.MarshalIndent(claims, "", "  ")
			got = append(got, '\n')
			path := filepath.Join("testdata", strings.NewReplacer("/", "-", ".", "_").Replace(tc.file)+".golden.json")
			if *update {
				os.WriteFile(path, got, 0o644)
				return
			}
			want, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs or is missing (%v); go test -update after checking:\n%s", path, err, got)
			}
		})
	}
}

func TestProfessionalHierarchy(t *testing.T) {
	dir := testenv.Corpus(t)
	data, err := os.ReadFile(filepath.Join(dir, "linuxforhealth-x12/demo.example1.837"))
	if err != nil {
		t.Fatal(err)
	}
	claims, _ := claimsOf(t, data)
	c := claims[0]
	if c.ClaimID != "26463774" || c.Subscriber.Last != "SMITH" || c.Subscriber.MemberID != "JS00111223333" ||
		c.Patient == nil || c.Patient.First != "TED" || c.Patient.Relationship != "19" ||
		c.Payer.Name != "KEY INSURANCE COMPANY" || c.BillingProvider.TaxID != "587654321" ||
		len(c.Diagnoses) != 2 || c.Diagnoses[0].Code != "0340" || c.FacilityCode != "11" || c.Frequency != "1" ||
		len(c.Lines) != 4 || c.Lines[0].Procedure != "99213" || c.Lines[0].Date != "2006-10-03" {
		t.Errorf("claim %+v", c)
	}
}

// TestClaimKeysAreDigestsOfTheBusinessIdentity: the effect key names
// sender, receiver, CLM01, CLM05-3 and the claim's content digest, the
// ordering key all but the frequency and content, both as SHA-256 digests
// with no patient control number in clear.
func TestClaimKeysAreDigestsOfTheBusinessIdentity(t *testing.T) {
	c := Claim{ClaimID: "26463774", Frequency: "1"}
	key, order := EffectKey("ZZ:SUB", "ZZ:RCV", c, "h1"), OrderingKey("ZZ:SUB", "ZZ:RCV", c)
	if !regexp.MustCompile(`^claim:[0-9a-f]{64}$`).MatchString(key) ||
		!regexp.MustCompile(`^claimorder:[0-9a-f]{64}$`).MatchString(order) {
		t.Fatalf("keys %s %s", key, order)
	}
	if strings.Contains(key+order, c.ClaimID) {
		t.Error("CLM01 in clear in a key")
	}
	if EffectKey("ZZ:SUB", "ZZ:RCV", Claim{ClaimID: "26463774", Frequency: "1", TotalCharge: x12.MustMoney("9")}, "h1") != key {
		t.Error("the effect key depends on more than the business identity and the content digest")
	}
	replacement := Claim{ClaimID: "26463774", Frequency: "7"}
	if EffectKey("ZZ:SUB", "ZZ:RCV", replacement, "h1") == key || OrderingKey("ZZ:SUB", "ZZ:RCV", replacement) != order {
		t.Error("a replacement must have its own effect key and the original's ordering key")
	}
	for _, other := range []string{
		EffectKey("ZZ:OTHER", "ZZ:RCV", c, "h1"), EffectKey("ZZ:SUB", "ZZ:OTHER", c, "h1"),
		EffectKey("ZZ:SUB", "ZZ:RCV", Claim{ClaimID: "26463775", Frequency: "1"}, "h1"),
		// A corrected claim under the same CLM01 and frequency.
		EffectKey("ZZ:SUB", "ZZ:RCV", c, "h2"),
		// The parts are encoded unambiguously: moving a character from one
		// part to the next changes the key.
		EffectKey("ZZ:SU", "BZZ:RCV", c, "h1"),
	} {
		if other == key {
			t.Errorf("another claim shares the key %s", key)
		}
	}
}

func TestBadClaimsAreLocated(t *testing.T) {
	dir := testenv.Corpus(t)
	data, err := os.ReadFile(filepath.Join(dir, "linuxforhealth-x12/demo.example1.837"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, tc := range []struct {
		name, from, to string
		seg            string
		elem           int
		code           string
		reject         bool
	}{
		{"no charge", "CLM*26463774*100.00*", "CLM*26463774**", "CLM", 2, "1", true},
		{"bad charge", "CLM*26463774*100", "CLM*26463774*1OO", "CLM", 2, "6", true},
		{"bad line charge", "SV1*HC:99213*40", "SV1*HC:99213*4O", "SV1", 2, "6", true},
		{"no procedure", "SV1*HC:99213*40", "SV1*99213*40", "SV1", 1, "1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(text, tc.from, tc.to, 1)
			if edited == text {
				t.Fatal("edit did not apply")
			}
			_, probs := claimsOf(t, []byte(edited))
			if len(probs) == 0 {
				t.Fatal("no problem")
			}
			p := probs[0]
			if p.SegmentID != tc.seg || p.Element != tc.elem || p.ElementCode != tc.code || p.Reject != tc.reject || p.Position < 2 {
				t.Errorf("problem %+v", p)
			}
			if p.ContextName != "CLM01" || p.ContextValue != "26463774" {
				t.Errorf("context %q %q", p.ContextName, p.ContextValue)
			}
		})
	}
}
