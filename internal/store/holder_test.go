package store

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestHolderIDsUniqueEvenAsPID1: holder ids name the host and pid and
// still differ between processes that share both (containers all run as
// pid 1 under one host name).
func TestHolderIDsUniqueEvenAsPID1(t *testing.T) {
	host, _ := os.Hostname()
	a, b := NewHolderID(), NewHolderID()
	if a == b {
		t.Errorf("two holder ids are equal: %s", a)
	}
	if prefix := fmt.Sprintf("%s-%d-", host, os.Getpid()); !strings.HasPrefix(a, prefix) {
		t.Errorf("holder id %s, want it to start with %s", a, prefix)
	}
}
