package process

import (
	"testing"

	"github.com/ediwatch/ediwatch/internal/x12/remit"
)

// TestPaymentHashLeavesOutTheProductionDate: the hash cut from the one
// encoding equals the hash of the payment encoded without its production
// date, and two production dates hash alike.
func TestPaymentHashLeavesOutTheProductionDate(t *testing.T) {
	p := remit.Payment{TraceNumber: "EFT1", PayerID: "1512345678", ProductionDate: "20261128"}
	undated := p
	undated.ProductionDate = ""
	want := contentHash(mustJSON(&undated))
	if got := paymentHash(mustJSON(&p), p.ProductionDate); got != want {
		t.Errorf("hash %s, want %s (the undated encoding's)", got, want)
	}
	later := p
	later.ProductionDate = "20261130"
	if paymentHash(mustJSON(&later), later.ProductionDate) != want {
		t.Error("another production date changed the hash")
	}
	if paymentHash(mustJSON(&undated), "") != want {
		t.Error("no production date: the hash is not the encoding's")
	}
}
