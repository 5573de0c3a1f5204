package envelope

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ediwatch/ediwatch/internal/testenv"
)

// corpusDir returns the public X12 corpus directory, which the README test
// command provides; under CI a missing corpus fails the run.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir := testenv.Corpus(t)
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Fatalf("corpus at %s: %v", dir, err)
	}
	return dir
}

// verdict is what SOURCES.md says of a file, where it is clear-cut.
type verdict struct {
	x12          bool
	valid        bool
	interchanges int
	sets         int
	codes        []string // error codes that must be reported
}

var corpusVerdicts = map[string]verdict{
	"imsweb-x12-parser/x12_999_accepted.txt":                                   {x12: true, interchanges: 1, sets: 1, codes: []string{"iea02_mismatch"}},
	"imsweb-x12-parser/x12_999_rejected.txt":                                   {x12: true, valid: true, interchanges: 1, sets: 1},
	"imsweb-x12-parser/x12_277CA_rejected.txt":                                 {x12: true, valid: true, interchanges: 1, sets: 1},
	"imsweb-x12-parser/x12_bad_segment_identifier.txt":                         {x12: true, interchanges: 1, sets: 1, codes: []string{"segment_id", "se01_count"}},
	"imsweb-x12-parser/x12_multiple_gs.txt":                                    {x12: true, interchanges: 1, sets: 3, codes: []string{"iea01_count", "gs06_duplicate", "se01_count"}},
	"imsweb-x12-parser/x12_multiple_isa.txt":                                   {x12: true, interchanges: 2, sets: 2, codes: []string{"se01_count"}},
	"imsweb-x12-parser/x12_multiple_st.txt":                                    {x12: true, interchanges: 1, sets: 2, codes: []string{"st02_duplicate", "ge01_count", "se01_count"}},
	"imsweb-x12-parser/x12_no_isa_line.txt":                                    {codes: []string{"not_x12"}},
	"imsweb-x12-parser/x12_valid.txt":                                          {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"imsweb-x12-parser/x12_valid_different_separators.txt":                     {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"imsweb-x12-parser/x12_bad_first_line.txt":                                 {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"imsweb-x12-parser/x223-test.txt":                                          {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"linuxforhealth-x12/cob-contractural-adjustment.835":                       {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/demo.example1.837":                                     {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/institutional-claim.837i":                              {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/managed-care.835":                                      {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/medicare-part-a.835":                                   {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/secondary-payment.835":                                 {x12: true, valid: true, interchanges: 1, sets: 1},
	"linuxforhealth-x12/two-claims-single-provider.837i":                       {x12: true, valid: true, interchanges: 1, sets: 1},
	"moov-io-x12/example_5010_835-sample1.txt":                                 {x12: true, valid: true, interchanges: 1, sets: 2},
	"nirmitee-clearinghouse-simulator/00455.20260830165653.000006.ERA.835.edi": {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"nirmitee-clearinghouse-simulator/EXAMPLECLINI.20260830165653.999":         {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"nirmitee-clearinghouse-simulator/EXAMPLECLINI.20260830165653.CLP.277":     {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"oopfactory-x12parser/835_WithMultipleInterchanges.txt":                    {x12: true, valid: true, interchanges: 3, sets: 3},
	"oopfactory-x12parser/ExampleFromNth.txt":                                  {x12: true, valid: true, interchanges: 3, sets: 3},
	"oopfactory-x12parser/DHS_Wisconsin_Sample.txt":                            {x12: true, valid: true, interchanges: 1, sets: 1},
	"oopfactory-x12parser/Spec_3.1.1.txt":                                      {x12: true, valid: true, interchanges: 1, sets: 1},
	"oopfactory-x12parser/TechnicalAcknowledgment_Sample1.txt":                 {x12: true, interchanges: 1, sets: 0, codes: []string{"ta1_syntax"}},
	"oopfactory-x12parser/TechnicalAcknowledgment_SampleFromJeffN825.txt":      {x12: true, valid: true, interchanges: 1, sets: 0},
	"oopfactory-x12parser/UnicodeExample.txt":                                  {codes: []string{"utf16"}},
	"pyx12/834_lui_id_5010.999.txt":                                            {x12: true, valid: true, interchanges: 1, sets: 4},
	"pyx12/835_mult_loops.txt":                                                 {x12: true, valid: true, interchanges: 1, sets: 1},
	"staedi/invalid999.edi":                                                    {x12: true, interchanges: 1, sets: 1, codes: []string{"se01_count"}},
	"staedi/sample837-original.edi":                                            {x12: true, valid: true, interchanges: 1, sets: 1},
	"staedi/simple999.edi":                                                     {x12: true, valid: true, interchanges: 1, sets: 1},
	"staedi/x12_interchange_ack.txt":                                           {x12: true, interchanges: 1, sets: 0, codes: []string{"iea01_count"}},
	"stupidedi/835-X221-case-1.edi":                                            {x12: true, interchanges: 1, sets: 1, codes: []string{"data_before_isa"}},
	"stupidedi/835-X221A1-dollars-and-data-sent-separate.edi":                  {x12: true, valid: true, interchanges: 1, sets: 1},
	"stupidedi/999-X231A1-response-to-functional-group-containing-3-837s.edi":  {x12: true, valid: true, interchanges: 1, sets: 1},
	"tastypackets-x12-parser/multi-line-not-delimited.edi":                     {x12: true, valid: true, interchanges: 1, sets: 1},
	"tastypackets-x12-parser/profee-multiple.edi":                              {x12: true, interchanges: 156, sets: 156, codes: []string{"isa13_duplicate"}}, // 156 byte-identical interchanges: ISA13 repeats from one sender (TA105 025)
	"uhin-x12-parser-library/TA1.edi":                                          {x12: true, interchanges: 1, sets: 0, codes: []string{"iea01_count"}},
}

// TestCorpus reads every file of the public corpus without panic, checks
// every file is classified, and checks the SOURCES.md verdicts that are
// clear-cut.
func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("corpus has %d files, want the 56 of SOURCES.md", len(files))
	}
	checked := 0
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(bytes.NewReader(data), Options{})
			if err != nil {
				t.Fatal(err)
			}
			keys := f.Keys()
			if len(keys) == 0 {
				t.Fatal("no key: every input must be keyed")
			}
			if !f.X12 && !strings.HasPrefix(keys[0], "sha256:") {
				t.Fatalf("not X12 but key %q", keys[0])
			}
			v, ok := corpusVerdicts[rel]
			if !ok {
				return
			}
			checked++
			sets := 0
			for _, ix := range f.Interchanges {
				for _, g := range ix.Groups {
					sets += len(g.Sets)
				}
			}
			var codes []string
			for _, e := range f.AllErrors() {
				codes = append(codes, e.Cause.Code)
			}
			if f.X12 != v.x12 || f.Valid() != v.valid || len(f.Interchanges) != v.interchanges || sets != v.sets {
				t.Errorf("x12=%v valid=%v interchanges=%d sets=%d, want %+v (errors %v)",
					f.X12, f.Valid(), len(f.Interchanges), sets, v, codes)
			}
			for _, c := range v.codes {
				if !slices.Contains(codes, c) {
					t.Errorf("missing error %s; got %v", c, codes)
				}
			}
		})
	}
	if checked != len(corpusVerdicts) {
		t.Errorf("checked %d verdicts of %d: a corpus file is missing", checked, len(corpusVerdicts))
	}
}

// TestCorpusIdenticalInterchanges: 156 byte-identical interchanges in one
// file yield 156 copies of one key with one content hash: the inbox, not
// the reader, makes 155 of them duplicates.
func TestCorpusIdenticalInterchanges(t *testing.T) {
	dir := corpusDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "tastypackets-x12-parser", "profee-multiple.edi"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(bytes.NewReader(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := f.Keys()
	if len(keys) != 156 || len(slices.Compact(slices.Clone(keys))) != 1 {
		t.Fatalf("%d keys, %d distinct; want 156 copies of one", len(keys), len(slices.Compact(slices.Clone(keys))))
	}
	hashes := setHashes(f)
	if len(slices.Compact(hashes)) != 1 {
		t.Errorf("identical interchanges hashed differently")
	}
	// The single-line and pretty-printed versions of profee are the same
	// document: same key, same content hash.
	one, _ := os.ReadFile(filepath.Join(dir, "tastypackets-x12-parser", "profee-one-line.edi"))
	pretty, _ := os.ReadFile(filepath.Join(dir, "tastypackets-x12-parser", "profee.edi"))
	f1, _ := Parse(bytes.NewReader(one), Options{})
	f2, _ := Parse(bytes.NewReader(pretty), Options{})
	if !slices.Equal(f1.Keys(), f2.Keys()) || !slices.Equal(setHashes(f1), setHashes(f2)) {
		t.Errorf("one-line %v %v vs pretty %v %v", f1.Keys(), setHashes(f1), f2.Keys(), setHashes(f2))
	}
}
