package httpapi

import "github.com/awaken-dev/awaken/pkg/contracts"

// LimitInfo describes one host limit as configured.
type LimitInfo struct {
	Name   string              `json:"name"`
	Kind   contracts.LimitKind `json:"kind"`
	Key    string              `json:"key"`
	Max    float64             `json:"max"`
	Window string              `json:"window,omitempty"`
	Over   contracts.LimitOver `json:"over"`
	Shadow bool                `json:"shadow,omitempty"`
}

// LimitsReport is the answer of GET /v1/limits: the host limits in configuration order
// and the current use of each key value (and window) the ledger holds, by limit then key.
type LimitsReport struct {
	Limits []LimitInfo          `json:"limits"`
	Use    []contracts.LimitUse `json:"use"`
	// Truncated is set when the ledger held more entries than the report lists.
	Truncated bool `json:"truncated,omitempty"`
}
