// Package handwrite moves records by hand; the archrules test must find every write.
package handwrite

import "github.com/awaken-dev/awaken/pkg/contracts"

// Move writes what only the transitions may write.
func Move(r *contracts.CallRecord, b *contracts.BatchRecord) {
	_ = r.Phase // a read is fine
	view := struct{ Phase string }{}
	r.Phase = contracts.RequestedPhase()
	r.Timeline = append(r.Timeline, contracts.TimelineMark{Stage: "x"})
	r.EnteredBy++
	b.Phase = contracts.BatchPhasePublished
	r.Entered, r.EnteredBy = true, 7
	_ = &b.Submission // taking an address to read through is fine
	view.Phase = "not a record"
}
