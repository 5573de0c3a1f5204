// Package storetest is the conformance suite every store driver passes:
// the same tests, against a real database, prove the same guarantees.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ediwatch/ediwatch/internal/inbox"
	"github.com/ediwatch/ediwatch/internal/outbox"
	"github.com/ediwatch/ediwatch/internal/process"
	"github.com/ediwatch/ediwatch/internal/store"
	"github.com/ediwatch/ediwatch/internal/x12gen"
)

// NewStore returns a migrated, empty store private to the test; the
// driver's test closes and removes it with t.Cleanup.
type NewStore func(t *testing.T) store.Store

// Routes sends every effect kind to a sink of its own name's family.
var Routes = map[string][]string{
	process.KindPayment: {"ledger"}, process.KindClaim: {"ledger"},
	process.KindAck999: {"acks"}, process.KindAckTA1: {"acks"},
}

// Fixture returns a file of internal/envelope/testdata.
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "envelope", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Options are the ingest options of the suite's tests: every file is
// written while it is parsed (inbox.Options.PipeFrom 1) in a test of
// Run's "Piped" runs, each file as its size decides elsewhere.
func Options(t testing.TB, s inbox.Ingester) inbox.Options {
	o := inbox.Options{Store: s, Routes: Routes}
	if strings.Contains(t.Name()+"/", "/"+pipedRuns+"/") {
		o.PipeFrom = 1
	}
	return o
}

// pipedRuns names the subtests of Run that run the ingest tests (piped)
// again with every file written while it is parsed.
const pipedRuns = "Piped"

// piped are the tests that Run runs again under pipedRuns: those whose
// files are ingested, in every outcome.
var piped = []string{"SameFileThreeTimes", "PayloadBytesReadBack", "RunOfSetsMixedOutcomes",
	"SameFileConcurrently", "RegeneratedIsBusinessDup", "OtherSenderIsNewDocument", "KeyConflictQuarantined",
	"RejectedKeyReclaimed", "NotX12KeyedBySHA256", "FailureBeforeCommitLeavesNothing", "StaleFenceCommitsNothing",
	"ControlNumbers", "AnswerLookup", "RejectedKeyReclaimedSameHash", "EffectConflictNotBusinessDup",
	"EffectConflictConcurrently", "SecondIngestSameAsFull", "ClaimLookupPrunedRedoes", "ClaimLookupRejectedRedoes",
	"ClaimLookupOneRejectedRedoes", "MultiSinkRowsPerEffectAndSink", "RouteOrderDoesNotMatter", "ConflictNotPostedToANewSink", "RouteOrdersConcurrently", "OverlappingFilesConcurrently",
	"RunRepeatingItsOwnKeys", "FileOutcomesPerArrival", "Ledger", "SmallFileNotLookedUp", "CleanKeptWithTheClaim",
	"CleanDuplicatesAcknowledgedAsBefore"}

// Ingest records data as the file path of source "test".
func Ingest(t testing.TB, s store.Store, path string, data []byte) (*inbox.Report, error) {
	corr := store.NewCorrelationID()
	return inbox.Ingest(context.Background(), Options(t, s), inbox.FileInfo{Source: "test", Path: path, Size: int64(len(data)), MTime: t0,
		SHA256: "sha-" + path, CorrelationID: corr, Now: t0}, bytes.NewReader(data))
}

// IngestNow is Ingest stamped with the current time, so its rows are due
// for a relay running on the real clock.
func IngestNow(t testing.TB, s store.Store, path string, data []byte) (*inbox.Report, error) {
	return inbox.Ingest(context.Background(), Options(t, s), inbox.FileInfo{Source: "test",
		Path: path, Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path, CorrelationID: store.NewCorrelationID(),
		Now: time.Now().UTC()}, bytes.NewReader(data))
}

func mustIngest(t *testing.T, s store.Store, path string, data []byte) *inbox.Report {
	t.Helper()
	r, err := Ingest(t, s, path, data)
	if err != nil {
		t.Fatalf("ingest %s: %v", path, err)
	}
	return r
}

func counts(t *testing.T, s store.Store) store.Counts {
	t.Helper()
	c, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Tests returns every test of the suite by name. A suite test that is
// not listed here never runs: TestEverySuiteTestIsListed fails then.
func Tests() map[string]func(*testing.T, store.Store) {
	return map[string]func(*testing.T, store.Store){
		"SameFileThreeTimes":                  testSameFileThreeTimes,
		"PayloadBytesReadBack":                testPayloadBytesReadBack,
		"RunOfSetsMixedOutcomes":              testRunOfSetsMixedOutcomes,
		"DeadRowsBySinkKindAndTime":           testDeadFilter,
		"DeadFilterTimeZones":                 testDeadFilterZones,
		"DeadClaimPassedByALaterOne":          testDeadClaimPassedByALaterOne,
		"LastFileTimesPerSource":              testLastFileTimes,
		"FilesListAndDetail":                  testFilesListAndDetail,
		"ActivityPerHourAndSink":              testActivityPerHourAndSink,
		"LeaseStatesListEveryLease":           testLeaseStatesListEveryLease,
		"LastFileNotPostProcessing":           testLastFileTimesIgnorePostProcessing,
		"SameFileConcurrently":                testSameFileConcurrently,
		"RegeneratedIsBusinessDup":            testRegenerated,
		"OtherSenderIsNewDocument":            testOtherSender,
		"KeyConflictQuarantined":              testKeyConflict,
		"RejectedKeyReclaimed":                testRejectedReclaimed,
		"NotX12KeyedBySHA256":                 testNotX12,
		"FailureBeforeCommitLeavesNothing":    testFailureBeforeCommit,
		"ClaimLeaseFencing":                   testLeaseFencing,
		"ClaimersNeverShareRows":              testClaimersNeverShare,
		"OrderingKeyOrder":                    testOrderingKey,
		"RowsBehindWaitParked":                testRowsBehindWaitParked,
		"RetrySnoozeDeadReplayDiscard":        testTransitions,
		"Stats":                               testStats,
		"DisabledSinkNeverClaimed":            testDisabledSinkNeverClaimed,
		"DisableSinkConcurrently":             testDisableSinkConcurrently,
		"ParkDisabledRowsArrivedLater":        testParkDisabled,
		"Stale410LeavesEnabledSink":           testStale410LeavesEnabledSink,
		"Leases":                              testLeases,
		"CheckLease":                          testCheckLease,
		"StaleFenceCommitsNothing":            testStaleFenceCommitsNothing,
		"ControlNumbers":                      testControlNumbers,
		"AnswerLookup":                        testAnswerLookup,
		"Prune":                               testPrune,
		"PrunePayloads":                       testPrunePayloads,
		"PrunedClaimKeepsItsOrderingKey":      testPrunedClaimKeepsItsOrderingKey,
		"MigrateTwiceConcurrently":            testMigrateAgain,
		"RejectedKeyReclaimedSameHash":        testRejectedKeyClaimedByNextProcessing,
		"EffectConflictNotBusinessDup":        testEffectConflict,
		"EffectConflictConcurrently":          testEffectConflictConcurrently,
		"Ledger":                              testLedger,
		"CompleteMany":                        testCompleteMany,
		"ExtendLeasesFenced":                  testExtendLeasesFenced,
		"OrderIsPerSink":                      testOrderIsPerSink,
		"ClaimOnlyListedSinks":                testClaimOnlyListedSinks,
		"ReplayFreshAgeKeepsHistory":          testReplayFreshAgeKeepsHistory,
		"SecondIngestSameAsFull":              testSecondIngestSameAsFull,
		"CleanKeptWithTheClaim":               testCleanKeptWithTheClaim,
		"CleanDuplicatesAcknowledgedAsBefore": testCleanDuplicatesAcknowledgedAsBefore,
		"ClaimLookupPrunedRedoes":             testClaimLookupPruned,
		"ClaimLookupRejectedRedoes":           testClaimLookupRejected,
		"SmallFileNotLookedUp":                testSmallFileNotLookedUp,
		"ClaimLookupOneRejectedRedoes":        testClaimLookupOneRejected,
		"AttemptsWithTransitions":             testAttemptsWithTransitions,
		"AttemptsCompleteManyBatch":           testAttemptsCompleteManyBatch,
		"AttemptsBounded":                     testAttemptsBounded,
		"AttemptsPrunedWithRow":               testAttemptsPrunedWithRow,
		"DeadEventWithTransition":             testDeadEventWithTransition,
		"MultiSinkRowsPerEffectAndSink":       testMultiSinkRowsPerEffectAndSink,
		"RouteOrderDoesNotMatter":             testRouteOrderDoesNotMatter,
		"ConflictNotPostedToANewSink":         testConflictNotPostedToANewSink,
		"RouteOrdersConcurrently":             testRouteOrdersConcurrently,
		"PollStatusPerDirectory":              testPollStatusPerDirectory,
		"PollStatusFencedByLease":             testPollStatusFencedByLease,
		"AttemptStatsPerSink":                 testAttemptStatsPerSink,
		"FileOutcomesPerArrival":              testFileOutcomesPerArrival,
		"SessionRevocation":                   testSessionRevocation,
		"OverlappingFilesConcurrently":        testOverlappingLargeFilesConcurrently,
		"RunRepeatingItsOwnKeys":              testRunRepeatingItsOwnKeys,
		"AckNumbersWhileWriting":              testAckNumbersWhileWriting,
		"ClaimedAcksPerGroup":                 testClaimedAcksPerGroup,
		"AckNumberWhileAReservationWaits":     testAckNumberWhileAReservationWaits,
		"IngestWakesListeners":                testIngestWakesListeners,
	}
}

// Run runs the suite.
func Run(t *testing.T, newStore NewStore) {
	tests := Tests()
	names := make([]string, 0, len(tests))
	for n := range tests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := tests[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newStore(t))
		})
	}
	t.Run(pipedRuns, func(t *testing.T) {
		for _, name := range piped {
			fn := tests[name]
			if fn == nil {
				t.Fatalf("piped test %s is not in the suite", name)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fn(t, newStore(t))
			})
		}
	})
}

func testSameFileThreeTimes(t *testing.T, s store.Store) {
	data := Fixture(t, "835_canonical.x12")
	first := mustIngest(t, s, "a.835", data)
	if first.Count(inbox.Processed) != 1 || len(first.Sets[0].EffectKeys) != 1 || len(first.AckKeys) != 1 {
		t.Fatalf("first: %+v", first)
	}
	orig := first.Sets[0].OriginalCorrelationID
	for i := 0; i < 2; i++ {
		r := mustIngest(t, s, fmt.Sprintf("copy%d.835", i), data)
		if r.Count(inbox.Duplicate) != 1 || r.Sets[0].OriginalCorrelationID != orig || len(r.AckKeys) != 0 {
			t.Errorf("copy %d: %+v", i, r.Sets)
		}
	}
	c := counts(t, s)
	if c.Inbox["processed"] != 1 || sum(c.Outbox) != 2 || c.Sightings["duplicate"] != 2 || c.Files["ingested"] != 3 {
		t.Errorf("counts %+v", c)
	}
}

func testSameFileConcurrently(t *testing.T, s store.Store) {
	data := Fixture(t, "835_canonical.x12")
	const n = 50
	results := make([]*inbox.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = Ingest(t, s, fmt.Sprintf("drop/%d.835", i), data)
		}()
	}
	wg.Wait()
	processed, orig := 0, ""
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("ingest %d: %v", i, errs[i])
		}
		if r.Sets[0].Outcome == inbox.Processed {
			processed++
			orig = r.Sets[0].OriginalCorrelationID
		}
	}
	if processed != 1 {
		t.Fatalf("%d copies processed, want exactly 1", processed)
	}
	for _, r := range results {
		if o := r.Sets[0]; o.Outcome != inbox.Processed && (o.Outcome != inbox.Duplicate || o.OriginalCorrelationID != orig) {
			t.Errorf("copy: %+v, want a duplicate of %s", o, orig)
		}
	}
	c := counts(t, s)
	if c.Inbox["processed"] != 1 || c.Outbox["pending"] != 2 || c.Sightings["duplicate"] != n-1 {
		t.Errorf("counts %+v", c)
	}
}

func testRegenerated(t *testing.T, s store.Store) {
	mustIngest(t, s, "a.835", Fixture(t, "835_canonical.x12"))
	r := mustIngest(t, s, "b.835", Fixture(t, "835_regenerated.x12"))
	if r.Count(inbox.BusinessDuplicate) != 1 || len(r.Sets[0].EffectKeys) != 0 {
		t.Fatalf("regenerated: %+v", r.Sets)
	}
	c := counts(t, s)
	// One payment; a 999 for each interchange's group.
	if c.Inbox["processed"] != 2 || c.Sightings["business_duplicate"] != 1 || sum(c.Outbox) != 3 {
		t.Errorf("counts %+v", c)
	}
	rows, _ := s.Claim(context.Background(), t0, []string{"ledger"}, 10, time.Minute)
	if len(rows) != 1 || rows[0].EffectKey != "payment:1512345678:EFT0001" {
		t.Errorf("ledger rows %v", rows)
	}
}

func testOtherSender(t *testing.T, s store.Store) {
	data := Fixture(t, "835_canonical.x12")
	mustIngest(t, s, "a.835", data)
	other := bytes.ReplaceAll(data, []byte("ACMEHP         "), []byte("OTHERHP        "))
	other = bytes.ReplaceAll(other, []byte("*ACMEHP*"), []byte("*OTHERHP*"))
	other = bytes.Replace(other, []byte("TRN*1*EFT0001*1512345678"), []byte("TRN*1*EFT0001*1999999999"), 1)
	r := mustIngest(t, s, "b.835", other)
	if r.Count(inbox.Processed) != 1 || len(r.Sets[0].EffectKeys) != 1 {
		t.Fatalf("other sender: %+v", r.Sets)
	}
	if c := counts(t, s); c.Inbox["processed"] != 2 {
		t.Errorf("counts %+v", c)
	}
}

func testKeyConflict(t *testing.T, s store.Store) {
	mustIngest(t, s, "a.835", Fixture(t, "835_canonical.x12"))
	r := mustIngest(t, s, "b.835", Fixture(t, "835_changed_content.x12"))
	if r.Count(inbox.Conflict) != 1 {
		t.Fatalf("changed content under the same key: %+v", r.Sets)
	}
	// The conflicting copy posts nothing and gets no 999: its content was
	// quarantined, not accepted.
	c := counts(t, s)
	if c.Sightings["conflict"] != 1 || c.Inbox["processed"] != 1 || c.Outbox["pending"] != 2 || len(r.AckKeys) != 0 {
		t.Errorf("counts %+v, acks %v", c, r.AckKeys)
	}
}

func testRejectedReclaimed(t *testing.T, s store.Store) {
	r := mustIngest(t, s, "bad.835", Fixture(t, "err_se01_count.x12"))
	if r.Count(inbox.Rejected) != 1 || len(r.AckKeys) != 1 {
		t.Fatalf("bad: %+v", r)
	}
	again := mustIngest(t, s, "bad-again.835", Fixture(t, "err_se01_count.x12"))
	if again.Count(inbox.Duplicate) != 1 {
		t.Errorf("the same rejected copy: %+v", again.Sets)
	}
	fixed := mustIngest(t, s, "fixed.835", Fixture(t, "835_canonical.x12"))
	if fixed.Count(inbox.Processed) != 1 || fixed.Sets[0].Key != r.Sets[0].Key || len(fixed.Sets[0].EffectKeys) != 1 {
		t.Errorf("corrected copy of a rejected key: %+v", fixed.Sets)
	}
	// The corrected group gets its own 999, accepting what the first one
	// rejected.
	if len(fixed.AckKeys) != 1 || fixed.AckKeys[0] == r.AckKeys[0] {
		t.Errorf("999 of the corrected copy: %v (rejected copy's: %v)", fixed.AckKeys, r.AckKeys)
	}
	if c := counts(t, s); c.Inbox["processed"] != 1 || c.Inbox["rejected"] != 0 {
		t.Errorf("counts %+v", c)
	}
}

func testNotX12(t *testing.T, s store.Store) {
	r := mustIngest(t, s, "note.txt", Fixture(t, "not_x12_text.txt"))
	if r.X12 || r.Count(inbox.Rejected) != 1 || r.Sets[0].Key[:7] != "sha256:" {
		t.Fatalf("not X12: %+v", r.Sets)
	}
	again := mustIngest(t, s, "note2.txt", Fixture(t, "not_x12_text.txt"))
	if again.Count(inbox.Duplicate) != 1 {
		t.Errorf("same bytes again: %+v", again.Sets)
	}
	if c := counts(t, s); c.Files["rejected"] != 2 || c.Inbox["rejected"] != 1 {
		t.Errorf("counts %+v", c)
	}
}

func testFailureBeforeCommit(t *testing.T, s store.Store) {
	data := Fixture(t, "multi_interchange.x12")
	boom := errors.New("injected")
	_, err := inbox.Ingest(store.FailBeforeCommit(context.Background(), boom), Options(t, s),
		inbox.FileInfo{Source: "test", Path: "x", Size: 1, MTime: t0, SHA256: "x", CorrelationID: "c", Now: t0},
		bytes.NewReader(data))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the injected failure", err)
	}
	c := counts(t, s)
	if sum(c.Inbox)+sum(c.Outbox)+sum(c.Files)+sum(c.Sightings) != 0 {
		t.Errorf("a failed ingest left rows: %+v", c)
	}
	// The same file then ingests normally (its three sets carry one
	// payment: one processed, two business duplicates).
	r := mustIngest(t, s, "x", data)
	if r.Count(inbox.Processed) != 1 || r.Count(inbox.BusinessDuplicate) != 2 {
		t.Errorf("after the failure: %+v", r.Sets)
	}
}

// paymentFile returns the canonical 835 as payment i (trace EFT{1000+i})
// under interchange and group control number ctl.
func paymentFile(t *testing.T, i, ctl int) []byte {
	d := bytes.Replace(Fixture(t, "835_canonical.x12"), []byte("EFT0001"), []byte(fmt.Sprintf("EFT%04d", 1000+i)), 1)
	d = bytes.ReplaceAll(d, []byte("000000101"), []byte(fmt.Sprintf("%09d", ctl)))
	d = bytes.Replace(d, []byte("*101*X*"), []byte(fmt.Sprintf("*%d*X*", ctl)), 1)
	return bytes.Replace(d, []byte("GE*1*101"), []byte(fmt.Sprintf("GE*1*%d", ctl)), 1)
}

// seedPayments ingests n payments, each with its 999; the 999s share one
// ordering key (the partner's acks).
func seedPayments(t *testing.T, s store.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := mustIngest(t, s, fmt.Sprintf("p%d.835", i), paymentFile(t, i, 1000+i))
		if r.Count(inbox.Processed) != 1 {
			t.Fatalf("seed %d: %+v", i, r.Sets)
		}
	}
}

func testLeaseFencing(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 1)
	rows, err := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Second)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rows, err)
	}
	old := rows[0]
	if again, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Second); len(again) != 0 {
		t.Fatalf("a leased row was claimed twice: %v", again)
	}
	later := t0.Add(5 * time.Second)
	if n, err := s.ReapExpired(ctx, later); err != nil || n != 1 {
		t.Fatalf("reap: %d %v", n, err)
	}
	rows, err = s.Claim(ctx, later, []string{"ledger"}, 10, time.Minute)
	if err != nil || len(rows) != 1 || rows[0].LeaseToken == old.LeaseToken || rows[0].Attempts != 2 {
		t.Fatalf("reclaim: %+v %v", rows, err)
	}
	if err := Complete(ctx, s, old.ID, old.LeaseToken, later, 200); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("complete with an expired lease: %v, want ErrLeaseLost", err)
	}
	if err := s.Retry(ctx, old.ID, old.LeaseToken, later, later, outbox.Failure{HTTPStatus: 500, Error: "x"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("retry with an expired lease: %v", err)
	}
	if err := Complete(ctx, s, rows[0].ID, rows[0].LeaseToken, later, 200); err != nil {
		t.Errorf("complete by the holder: %v", err)
	}
	if err := Complete(ctx, s, rows[0].ID, rows[0].LeaseToken, later, 200); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("second complete: %v", err)
	}
	if got, _ := s.GetOutbox(ctx, old.ID); got.Status != outbox.StatusDelivered {
		t.Errorf("status %s", got.Status)
	}
}

func testClaimersNeverShare(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 40)
	var mu sync.Mutex
	held := map[int64]int{}
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rows, err := s.Claim(ctx, t0, []string{"ledger"}, 3, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(rows) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rows {
					held[r.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(held) != 40 {
		t.Errorf("%d rows claimed, want 40", len(held))
	}
	for id, n := range held {
		if n != 1 {
			t.Errorf("row %d claimed %d times", id, n)
		}
	}
}

// testOrderingKey: acknowledgments to one partner share an ordering key;
// concurrent claimers deliver them in creation order, never two at once.
func testOrderingKey(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 12) // 12 ack.999 rows on one ordering key "acks:ZZ:ACMEHP"
	var mu sync.Mutex
	var delivered []int64
	inflight := 0
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := 0
			for idle < 50 {
				rows, err := s.Claim(ctx, t0, []string{"acks"}, 5, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if len(rows) == 0 {
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				idle = 0
				if len(rows) > 1 {
					t.Errorf("claimed %d rows of one ordering key at once", len(rows))
				}
				mu.Lock()
				inflight++
				if inflight > 1 {
					t.Error("two rows of one ordering key in flight")
				}
				delivered = append(delivered, rows[0].ID)
				inflight--
				mu.Unlock()
				if err := Complete(ctx, s, rows[0].ID, rows[0].LeaseToken, t0, 200); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if len(delivered) != 12 || !sort.SliceIsSorted(delivered, func(i, j int) bool { return delivered[i] < delivered[j] }) {
		t.Errorf("delivery order %v, want the 12 rows in creation order", delivered)
	}
}

func testTransitions(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 3)
	rows, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	a, b, c := rows[0], rows[1], rows[2]
	later := t0.Add(time.Hour)
	if err := s.Retry(ctx, a.ID, a.LeaseToken, t0, later, outbox.Failure{HTTPStatus: 503, Error: "unavailable"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Snooze(ctx, b.ID, b.LeaseToken, t0, later); err != nil {
		t.Fatal(err)
	}
	if err := s.Dead(ctx, c.ID, c.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "bad request"}); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.Claim(ctx, t0.Add(time.Minute), []string{"ledger"}, 10, time.Minute); len(due) != 0 {
		t.Errorf("rows due before their time: %v", due)
	}
	due, _ := s.Claim(ctx, later, []string{"ledger"}, 10, time.Minute)
	attempts := map[int64]int{}
	for _, r := range due {
		attempts[r.ID] = r.Attempts
	}
	if len(due) != 2 || attempts[a.ID] != 2 || attempts[b.ID] != 1 {
		t.Errorf("after retry and snooze: %v (a retried burns an attempt, a snoozed one does not)", attempts)
	}
	dead, _ := s.ListDead(ctx, outbox.DeadFilter{Sink: "ledger"}, 10)
	if len(dead) != 1 || dead[0].ID != c.ID || dead[0].LastStatus != 400 || dead[0].LastError != "bad request" {
		t.Fatalf("dead %+v", dead)
	}
	if n, err := s.Replay(ctx, outbox.DeadFilter{IDs: []int64{c.ID}}, later); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	replayed, _ := s.GetOutbox(ctx, c.ID)
	if replayed.Status != outbox.StatusPending || replayed.Attempts != 0 || replayed.EffectKey != c.EffectKey {
		t.Errorf("replayed %+v", replayed)
	}
	again, _ := s.Claim(ctx, later, []string{"ledger"}, 10, time.Minute)
	if len(again) != 1 || again[0].ID != c.ID {
		t.Fatalf("claim after replay: %v", again)
	}
	s.Dead(ctx, c.ID, again[0].LeaseToken, later, outbox.Failure{HTTPStatus: 400, Error: "still bad"})
	if n, err := s.Discard(ctx, outbox.DeadFilter{IDs: []int64{c.ID}}, later); err != nil || n != 1 {
		t.Fatalf("discard: %d %v", n, err)
	}
	if got, _ := s.GetOutbox(ctx, c.ID); got.Status != outbox.StatusDiscarded {
		t.Errorf("discarded row: %+v", got)
	}
	// The discarded row keeps its effect key: the same payment re-sent
	// under a new envelope still posts nothing.
	r := mustIngest(t, s, "resent.835", paymentFile(t, 2, 7002))
	if r.Count(inbox.BusinessDuplicate) != 1 {
		t.Errorf("re-sent discarded payment: %+v", r.Sets)
	}
	if _, err := s.GetOutbox(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing row: %v", err)
	}
}

func testStats(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 2)
	rows, _ := s.Claim(ctx, t0, []string{"ledger"}, 1, time.Minute)
	s.Dead(ctx, rows[0].ID, rows[0].LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "x"})
	st, err := s.Stats(ctx, t0.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	bySink := map[string]outbox.SinkStats{}
	for _, x := range st {
		bySink[x.Sink] = x
	}
	if l := bySink["ledger"]; l.Pending != 1 || l.Dead != 1 || l.OldestPending != 90*time.Second {
		t.Errorf("ledger stats %+v", l)
	}
	if a := bySink["acks"]; a.Pending != 2 {
		t.Errorf("acks stats %+v", a)
	}
}

func testLeases(t *testing.T, s store.Store) {
	ctx := context.Background()
	// The real clock: on PostgreSQL the database's clock decides expiry,
	// so a lease lapses here by a renewal with a negative TTL (a holder
	// that stopped renewing long ago), never by a made-up time.
	now := time.Now().UTC()
	tok, ok, err := s.AcquireLease(ctx, "source:acme:/out", "a", 30*time.Second, now)
	if err != nil || !ok || tok != 1 {
		t.Fatalf("acquire: %d %v %v", tok, ok, err)
	}
	if _, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "b", 30*time.Second, now); ok {
		t.Fatal("a held lease was taken")
	}
	if tok2, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "a", 30*time.Second, now); !ok || tok2 != 1 {
		t.Errorf("renewal by the holder: %d %v", tok2, ok)
	}
	if tok2, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "a", -time.Minute, now); !ok || tok2 != 1 {
		t.Fatalf("lapse: %d %v", tok2, ok)
	}
	tok3, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "b", 30*time.Second, now)
	if !ok || tok3 != 2 {
		t.Fatalf("takeover: %d %v", tok3, ok)
	}
	s.ReleaseLease(ctx, "source:acme:/out", "a", 1) // a stale release changes nothing
	if _, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "a", 30*time.Second, now); ok {
		t.Fatal("a stale release freed b's lease")
	}
	s.ReleaseLease(ctx, "source:acme:/out", "b", tok3)
	if tok4, ok, _ := s.AcquireLease(ctx, "source:acme:/out", "a", 30*time.Second, now); !ok || tok4 != 3 {
		t.Errorf("after release: %d %v", tok4, ok)
	}
}

// testCheckLease: CheckLease passes for the current token of a live
// lease only.
func testCheckLease(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	name := "poll:acme:/out"
	tok, _, _ := s.AcquireLease(ctx, name, "a", time.Minute, now)
	if err := s.CheckLease(ctx, inbox.Fence{Name: name, Token: tok}, now); err != nil {
		t.Errorf("current lease: %v", err)
	}
	if err := s.CheckLease(ctx, inbox.Fence{Name: "poll:other:/out", Token: tok}, now); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a lease never taken: %v, want ErrLeaseLost", err)
	}
	s.AcquireLease(ctx, name, "a", -time.Minute, now)
	if err := s.CheckLease(ctx, inbox.Fence{Name: name, Token: tok}, now); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("an expired lease: %v, want ErrLeaseLost", err)
	}
	tok2, _, _ := s.AcquireLease(ctx, name, "b", time.Minute, now)
	if err := s.CheckLease(ctx, inbox.Fence{Name: name, Token: tok}, now); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a lease taken over: %v, want ErrLeaseLost", err)
	}
	if err := s.CheckLease(ctx, inbox.Fence{Name: name, Token: tok2}, now); err != nil {
		t.Errorf("the new holder's lease: %v", err)
	}
}

// testStaleFenceCommitsNothing: a replica whose directory lease passed to
// another cannot commit an ingest; the holder of the current token can.
func testStaleFenceCommitsNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Now().UTC()
	name := "poll:test:/in"
	old, _, _ := s.AcquireLease(ctx, name, "replica-1", time.Minute, now)
	s.AcquireLease(ctx, name, "replica-1", -time.Minute, now) // replica-1 stalls; its lease lapses
	cur, ok, _ := s.AcquireLease(ctx, name, "replica-2", time.Minute, now)
	if !ok || cur == old {
		t.Fatalf("takeover: %d %v", cur, ok)
	}
	ingestFenced := func(path string, data []byte, fence inbox.Fence) (*inbox.Report, error) {
		return inbox.Ingest(ctx, Options(t, s), inbox.FileInfo{Source: "test", Path: path,
			Size: int64(len(data)), MTime: t0, SHA256: "sha-" + path, CorrelationID: store.NewCorrelationID(), Now: t0,
			Fence: fence}, bytes.NewReader(data))
	}
	// Enough sets to be written in several batches before Commit.
	var big bytes.Buffer
	x12gen.Remit{Control: 9000, SetsPerGroup: 600, Trace: "FENCE"}.Write(&big)
	for _, data := range [][]byte{Fixture(t, "835_canonical.x12"), big.Bytes()} {
		if _, err := ingestFenced("in/a.835", data, inbox.Fence{Name: name, Token: old}); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("ingest under a stale token: %v, want ErrLeaseLost", err)
		}
	}
	if c := counts(t, s); sum(c.Inbox)+sum(c.Outbox)+sum(c.Files)+sum(c.Sightings) != 0 {
		t.Fatalf("a stale replica committed %+v", c)
	}
	if _, err := ingestFenced("in/a.835", Fixture(t, "835_canonical.x12"), inbox.Fence{Name: name, Token: cur}); err != nil {
		t.Fatalf("ingest under the current token: %v", err)
	}
	if c := counts(t, s); c.Inbox["processed"] != 1 || c.Files["ingested"] != 1 {
		t.Errorf("counts %+v", c)
	}
}

func testControlNumbers(t *testing.T, s store.Store) {
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for i := 0; i < 25; i++ {
				n, err := s.NextControlNumber(ctx, "ZZ:US")
				if err != nil {
					t.Error(err)
					return
				}
				if n <= last {
					t.Errorf("%d after %d", n, last)
				}
				last = n
				mu.Lock()
				if seen[n] {
					t.Errorf("%d twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 || !seen[1] || !seen[200] {
		t.Errorf("%d numbers", len(seen))
	}
	if n, _ := s.NextControlNumber(ctx, "ZZ:OTHER"); n != 1 {
		t.Errorf("another sender starts at %d", n)
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 5)
	rows, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	for i, r := range rows {
		if i == 0 {
			s.Dead(ctx, r.ID, r.LeaseToken, t0, outbox.Failure{HTTPStatus: 400, Error: "x"})
			continue
		}
		Complete(ctx, s, r.ID, r.LeaseToken, t0, 200)
	}
	if n, err := s.Prune(ctx, t0, 2); err != nil || n != 0 {
		t.Fatalf("prune of nothing old: %d %v", n, err)
	}
	n, err := s.Prune(ctx, t0.Add(time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	c := counts(t, s)
	// Keys and delivered rows go; dead and pending rows stay, and so do
	// ledger rows of files still in their drop (pruning those would let
	// the poller fetch and post them again).
	if sum(c.Inbox) != 0 || c.Outbox["delivered"] != 0 || c.Outbox["dead"] != 1 || c.Outbox["pending"] != 5 ||
		c.Files["ingested"] != 5 || n != 5+4 {
		t.Errorf("after prune (%d rows): %+v", n, c)
	}
}

func testMigrateAgain(t *testing.T, s store.Store) {
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Migrate(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mustIngest(t, s, "a.835", Fixture(t, "835_canonical.x12"))
}

func testLedger(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustIngest(t, s, "in/a.835", Fixture(t, "835_canonical.x12"))
	mtime := t0.Add(-time.Hour)
	f := inbox.FileInfo{Source: "test", Path: "in/b.835", Size: 10, MTime: mtime, CorrelationID: "c", Now: t0}
	for i := 1; i <= 3; i++ {
		st, err := s.RecordFileProblem(ctx, f, inbox.FileRetrying, "connection reset")
		if err != nil || st.Attempts != i || st.Status != inbox.FileRetrying {
			t.Fatalf("attempt %d: %+v %v", i, st, err)
		}
	}
	f.Size = 11 // the file changed: attempts start again
	if st, _ := s.RecordFileProblem(ctx, f, inbox.FileRetrying, "x"); st.Attempts != 1 {
		t.Errorf("attempts after a change: %d", st.Attempts)
	}
	big := inbox.FileInfo{Source: "test", Path: "in/huge.835", Size: 1 << 40, MTime: mtime, CorrelationID: "c", Now: t0}
	s.RecordFileProblem(ctx, big, inbox.FileRejected, "larger than max_file_size")
	states, err := s.FileStates(ctx, "test", []string{"in/a.835", "in/b.835", "in/huge.835", "in/none.835"})
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 3 || states["in/a.835"].Status != inbox.FileIngested || states["in/a.835"].SHA256 != "sha-in/a.835" ||
		states["in/b.835"].Size != 11 || states["in/huge.835"].Status != inbox.FileRejected || !states["in/a.835"].MTime.Equal(t0) {
		t.Errorf("states %+v", states)
	}
	if states["in/a.835"].PostDone {
		t.Error("post_done before post-processing")
	}
	if err := s.MarkPostDone(ctx, "test", "in/a.835", t0); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.FileStates(ctx, "test", []string{"in/a.835"}); !st["in/a.835"].PostDone {
		t.Error("post_done not recorded")
	}
	// A later version of in/a.835 refused: the row holds its SHA-256 (or
	// none), never the ingested version's.
	refused := inbox.FileInfo{Source: "test", Path: "in/a.835", Size: 5, MTime: t0.Add(time.Minute),
		SHA256: "sha-refused", CorrelationID: "c2", Now: t0}
	if st, err := s.RecordFileProblem(ctx, refused, inbox.FileRejected, "decrypt: corrupt"); err != nil ||
		st.SHA256 != "sha-refused" {
		t.Errorf("refused version: %+v %v", st, err)
	}
	refused.Size, refused.SHA256 = 6, ""
	if st, err := s.RecordFileProblem(ctx, refused, inbox.FileRetrying, "reset"); err != nil || st.SHA256 != "" {
		t.Errorf("version never received: %+v %v", st, err)
	}
	if other, _ := s.FileStates(ctx, "other", []string{"in/a.835"}); len(other) != 0 {
		t.Errorf("another source's rows: %v", other)
	}
}

func testCompleteMany(t *testing.T, s store.Store) {
	ctx := context.Background()
	seedPayments(t, s, 3)
	rows, _ := s.Claim(ctx, t0, []string{"ledger"}, 10, time.Minute)
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	done := []outbox.Completion{{ID: rows[0].ID, Token: rows[0].LeaseToken, HTTPStatus: 200},
		{ID: rows[1].ID, Token: "stale-token", HTTPStatus: 200}, {ID: rows[2].ID, Token: rows[2].LeaseToken, HTTPStatus: 204}}
	lost, err := s.CompleteMany(ctx, done, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != rows[1].ID {
		t.Errorf("lost %v, want [%d]", lost, rows[1].ID)
	}
	for i, want := range []string{outbox.StatusDelivered, outbox.StatusInflight, outbox.StatusDelivered} {
		if r, _ := s.GetOutbox(ctx, rows[i].ID); r.Status != want {
			t.Errorf("row %d: %s, want %s", i, r.Status, want)
		}
	}
	if r, _ := s.GetOutbox(ctx, rows[2].ID); r.LastStatus != 204 {
		t.Errorf("status %d", r.LastStatus)
	}
}
