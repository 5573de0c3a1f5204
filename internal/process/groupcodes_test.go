package process

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGroupHeaderErrorsGetTheirOwnAK905: a group whose GS01 or GS08 is
// empty, or whose GS06 is not a control number, is rejected, and its 999
// says which (AK905 1, functional group not supported; 2, version not
// supported; 6, control number syntax) instead of one code for all three.
func TestGroupHeaderErrorsGetTheirOwnAK905(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "envelope", "testdata", "835_canonical.x12"))
	if err != nil {
		t.Fatal(err)
	}
	const gs = "GS*HP*ACMEHP*RIVERSIDE*20261130*0930*101*X*005010X221A1~"
	if !bytes.Contains(data, []byte(gs)) {
		t.Fatal("fixture changed: no " + gs)
	}
	for _, tc := range []struct {
		name, gs, code, ak905 string
	}{
		{"empty GS01", "GS**ACMEHP*RIVERSIDE*20261130*0930*101*X*005010X221A1~", "gs01_missing", "1"},
		{"empty GS08", "GS*HP*ACMEHP*RIVERSIDE*20261130*0930*101*X*~", "gs08_missing", "2"},
		{"GS06 not digits", "GS*HP*ACMEHP*RIVERSIDE*20261130*0930*1O1*X*005010X221A1~", "gs_syntax", "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Replace(data, []byte(gs), []byte(tc.gs), 1)
			if tc.name == "GS06 not digits" {
				in = bytes.Replace(in, []byte("GE*1*101~"), []byte("GE*1*1O1~"), 1)
			}
			r := run(t, in)
			g := r.file.Interchanges[0].Groups[0]
			if len(g.Errors) == 0 || g.Errors[0].Cause.Code != tc.code {
				t.Fatalf("group errors %v, want %s first", g.Errors, tc.code)
			}
			if len(r.sets) != 1 || r.sets[0].Status != Rejected {
				t.Fatalf("sets %+v, want one rejected", r.sets)
			}
			if len(r.acks) != 1 {
				t.Fatalf("%d acknowledgments, want the group's 999", len(r.acks))
			}
			ak9 := segments(t, x12Of(t, r.acks[0]), "AK9")
			if len(ak9) != 1 || len(ak9[0]) < 6 || ak9[0][1] != "R" || ak9[0][5] != tc.ak905 {
				t.Errorf("AK9 %v, want AK9*R with AK905 %s", ak9, tc.ak905)
			}
		})
	}
}
