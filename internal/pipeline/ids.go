package pipeline

import (
	"strconv"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Deterministic message ids: a redelivered input re-publishes its
// outputs under the same ids, so the stream drops the copies.

// BatchRecordedID is the ce-id of the run-record revision that records a batch: the
// gate's work for its first call (or its probe).
func BatchRecordedID(batchID string) string { return batchID + ":recorded" }

// ProbeID names the parallel-delegation probe of a batch (the operation of its fault
// points).
func ProbeID(batchID string) string { return batchID + ":probe" }

// ExecRequestID is the id of the executor request of one attempt.
func ExecRequestID(op string, attempt uint16) string {
	return op + ":exec:" + strconv.FormatUint(uint64(attempt), 10)
}

// OutputID is the id of a call's output announcement.
func OutputID(op string) string { return op + ":output" }

// AuditID is the id of a PermissionDecided record.
func AuditID(op, decision string) string { return op + ":audit:" + decision }

// AgentEventID is the id of a projection fact of a call.
func AgentEventID(op string, fact contracts.AgentEventType) string {
	return op + ":event:" + string(fact)
}

// EditedToolCallID is the id of the live tool_call fact an approval with edited
// arguments sends (apart from the decision's tool_call fact, which it follows).
func EditedToolCallID(op string) string { return op + ":event:tool_call:edited" }

// ResultID is the id of the result of call index of a batch.
func ResultID(batchID string, index int) string { return batchID + ":result:" + strconv.Itoa(index) }

// FinalizedID is the id of a batch's finalized event.
func FinalizedID(batchID string) string { return batchID + ":finalized" }

// BatchResultsID is the id of a batch's results message (io.awaken.toolbatch.results.v1):
// one per batch, so the stream deduplicates a re-publication by the batch id.
func BatchResultsID(batchID string) string { return batchID + ":results" }

// TicketOpenedID, TicketResolvedID and TicketTimerID identify ticket events.
func TicketOpenedID(corr string) string            { return corr + ":opened" }
func TicketResolvedID(corr string) string          { return corr + ":resolved" }
func TicketTimerID(corr, kind string) string       { return corr + ":" + kind }
func TicketRejectedID(resumeEventID string) string { return resumeEventID + ":rejected" }

// RunEndedID is the id of a run's io.awaken.run.ended.v1 event: one per run, since a run
// ends once.
func RunEndedID(runID string) string { return runID + ":ended" }

// RejectedID is the id of a batch rejection event for inbound event id.
func RejectedID(eventID string) string { return eventID + ":rejected" }

// UnchangedID is the id of the io.awaken.toolbatch.unchanged.v1 notice answering inbound
// event id, a submission of a batch already recorded with the same content.
func UnchangedID(eventID string) string { return eventID + ":unchanged" }
