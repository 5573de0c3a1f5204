package sink

import (
	"encoding/json"
	"fmt"
)

// FileBody returns what a file sink writes for a message and the file
// extension that goes with it: an acknowledgment ediwatch sends (ack.999,
// ack.ta1) as its X12 text ("x12"), every other kind as its structured
// CloudEvents JSON event, the body a structured HTTP sink posts ("json").
func FileBody(row Message) ([]byte, string, error) {
	if row.Kind == "ack.999" || row.Kind == "ack.ta1" {
		var a struct {
			X12 string `json:"x12"`
		}
		if err := json.Unmarshal(row.Payload, &a); err != nil {
			return nil, "", fmt.Errorf("ack payload: %w", err)
		}
		if a.X12 == "" {
			return nil, "", fmt.Errorf("ack payload: no x12")
		}
		return []byte(a.X12), "x12", nil
	}
	b, err := json.Marshal(event{SpecVersion: "1.0", ID: row.EffectKey, Source: eventSource, Type: eventType(row.Kind),
		Time: eventTime(row.CreatedAt), DataContentType: "application/json", Data: row.Payload})
	return b, "json", err
}
