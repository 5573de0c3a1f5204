package main

import (
	"os"
	"testing"
)

// TestMain lets tests run this test binary as the ediwatch command: with
// EDIWATCH_TEST_MAIN=1 it is main, so tests start real processes without
// building another binary.
func TestMain(m *testing.M) {
	if os.Getenv("EDIWATCH_TEST_MAIN") == "1" {
		os.Exit(realMain())
	}
	os.Exit(m.Run())
}
