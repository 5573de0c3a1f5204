package outbox

// BreakerStates returns the state of each sink's circuit breaker in this
// process, by sink: "closed", "half-open" or "open". Each replica has its
// own breakers. Safe for concurrent use with Run.
func (r *Relay) BreakerStates() map[string]string {
	out := make(map[string]string, len(r.breakers))
	for name, b := range r.breakers {
		out[name] = b.State().String()
	}
	return out
}
