package contracts

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix is the subject prefix used when the host configuration names none.
const DefaultPrefix = "awaken"

// CloudEvent types of the normative protocol and of the internal work subjects.
const (
	TypeBatchRequested = "io.awaken.toolbatch.requested.v1"
	TypeBatchRejected  = "io.awaken.toolbatch.rejected.v1"
	// TypeBatchUnchanged tells a submitter that its submission was identical content of a
	// batch the batcher already holds ([BatchUnchanged]), on [Names.UnchangedSubject].
	TypeBatchUnchanged = "io.awaken.toolbatch.unchanged.v1"
	TypeBatchFinalized = "io.awaken.toolbatch.finalized.v1"
	TypeToolResult     = "io.awaken.tool.result.v1"
	// TypeBatchResults carries a whole batch's publication in one message ([BatchResults]):
	// every result in model order and the finalized payload.
	TypeBatchResults   = "io.awaken.toolbatch.results.v1"
	TypeTicketOpened   = "io.awaken.ticket.opened.v1"
	TypeTicketResume   = "io.awaken.ticket.resume.v1"
	TypeTicketResolved = "io.awaken.ticket.resolved.v1"
	TypeTicketRejected = "io.awaken.ticket.rejected.v1"
	TypeAgentEvent     = "io.awaken.agent.event.v1"
	TypeAudit          = "io.awaken.audit.permission_decided.v1"
	// TypeToolProgress: a running tool's progress ([ToolProgress]), on the events subject.
	TypeToolProgress = "io.awaken.tool.progress.v1"
	// TypeRunEnded announces that a run ended ([RunEndedEvent]), on the run's events
	// subject, once the end is recorded on the run record.
	TypeRunEnded = "io.awaken.run.ended.v1"
	// TypeToolPauseAudit records an operator's pause or resume of a tool.
	TypeToolPauseAudit = "io.awaken.audit.tool_pause.v1"
	// TypeReconcileAudit records the end of an executor's reconcile of a call
	// ([ReconcileAudit]).
	TypeReconcileAudit = "io.awaken.audit.reconcile.v1"
	// TypeAuditCheckpoint is a signed checkpoint of the audit chains' heads
	// (pkg/auditchain.Checkpoint), on [Names.AuditCheckpointSubject].
	TypeAuditCheckpoint = "io.awaken.audit.checkpoint.v1"

	// Internal work events: not part of the public protocol, but versioned the same way so
	// that a mixed-version deployment fails loudly instead of misreading a payload.
	//
	// TypeBatchRecorded is the ce-type of the run-record revision that claims the run for a
	// batch and records it (the batch open, the run not ended): the gate's work, its first
	// call (or the probe of a parallel batch); the body is the run record.
	TypeBatchRecorded = "io.awaken.internal.batch.recorded.v1"
	// TypeExecRequest is the ce-type of the call-record revision that hands a call to its
	// executor (Executing, not entered, with its input); the body is the record.
	TypeExecRequest = "io.awaken.internal.exec.requested.v1"
	// TypeCallOutput is the ce-type of a terminal call-record revision (Completed or
	// Indeterminate), the work of the publisher's barrier and of the gate's sequential
	// dispatch (the next call); the body is the record.
	TypeCallOutput   = "io.awaken.internal.call.output.v1"
	TypeTicketExpire = "io.awaken.internal.ticket.expire.v1"
	TypeRunCancel    = "io.awaken.run.cancel.v1"
	// TypeCallCancel asks to cancel one call ([CallCancel]), on [Names.CallCancelSubject].
	TypeCallCancel = "io.awaken.call.cancel.v1"
	// TypeCallResolve asks to resolve one indeterminate call ([CallResolve]), on
	// [Names.CallResolveSubject].
	TypeCallResolve = "io.awaken.call.resolve.v1"
	// TypeResultCorrected corrects the published result of a call that was published
	// indeterminate and resolved by an operator afterwards ([ResultCorrected]), on the
	// run's results subject beside the batch's results, which never change.
	TypeResultCorrected = "io.awaken.tool.result.corrected.v1"
)

// Service names: the subcommands of the awaken binary, the CloudEvent sources
// ("awaken/{service}"), the fault-hook and log names, the NATS users of the example
// permissions and the containers of the deployment. Declared once, here.
const (
	ServiceBatcher     = "batcher"
	ServiceGate        = "gate"
	ServiceBrainExec   = "brain-exec"
	ServiceSandboxExec = "sandbox-exec"
	ServicePublisher   = "publisher"
	// ServiceAPI is the doors (HTTP api, console, micro service, MCP): not one of the five
	// pipeline services — it only publishes commands and reads records.
	ServiceAPI = "api"
)

// PipelineServices returns the five pipeline services in start order: consumers of later
// stages first, so that nothing is published to a stage that is not yet consuming in a
// fresh deployment.
func PipelineServices() []string {
	return []string{ServicePublisher, ServiceBrainExec, ServiceSandboxExec, ServiceGate, ServiceBatcher}
}

// Durable consumer names. Renaming one makes the server deliver its stream again from the
// start, so they are declared here once and never derived from Go identifiers.
const (
	ConsumerBatcherSubmit = "batcher-submit"
	// ConsumerGateBatches reads the run records' stream: a revision that records a batch
	// starts its gating.
	ConsumerGateBatches = "gate-batches"
	// ConsumerGateOutputs reads the call records' stream: the terminal revision of call i
	// of a sequential batch gates call i+1.
	ConsumerGateOutputs = "gate-outputs"
	ConsumerGateResume  = "gate-resume"
	ConsumerGateControl = "gate-control"
	ConsumerBrainExec   = "brain-exec"
	ConsumerSandboxExec = "sandbox-exec"
	ConsumerPublisher   = "publisher-outputs"
)

// Obsolete durables: consumers of earlier versions that nothing reads any more. `awaken
// setup` deletes them (and [Names.ObsoleteStreams]); see docs/operations.md, "Upgrading".
// Before issue 26's last cut, a gate request was a message of its own on the work stream
// (read by gate-requests) and the batcher published the next one on each output
// (batcher-outputs, on the call records' stream).
const (
	ObsoleteConsumerBatcherOutputs = "batcher-outputs"
	ObsoleteConsumerGateRequests   = "gate-requests"
)

// ObsoleteStreams are streams of earlier versions that nothing writes or reads any more:
// the work stream, which held the gate requests. `awaken setup` deletes them.
func (n Names) ObsoleteStreams() []string { return []string{n.upper() + "_WORK"} }

// ConsumerGateTimers is the durable consumer of ticket timers (TicketExpireSubject). Timers
// live in the timers stream and cancellations in the control stream, and one durable reads
// one stream, so the gate's control inputs use two durables: this one and
// [ConsumerGateControl] (run cancellations).
const ConsumerGateTimers = "gate-timers"

// ConsumerGateLimits is the gate's durable consumer of terminal call records, created only
// when the host policy has limits: it gives back the limit shares of calls that ended
// without running.
const ConsumerGateLimits = "gate-limits"

// ConsumerGateSweeper is the gate's durable consumer of the batch archive: when a finished
// batch's archived record expires (the run retention), it removes the batch's call and
// ticket records.
const ConsumerGateSweeper = "gate-sweeper"

// ConsumerGateRunSweeper is the gate's durable consumer of the run records' expiries,
// created only when the host policy has a limit keyed by run: when a run record expires
// (twice the run retention after the run's last batch finished), it removes the run's
// keys from the limits ledger.
const ConsumerGateRunSweeper = "gate-run-sweeper"

// Names derives every subject, stream and bucket from one configurable prefix. Stream and
// bucket names are upper-case or underscore forms of the prefix so two deployments with
// different prefixes can share one server.
type Names struct {
	Prefix string
	// Partitions is the deployment's partition count P (0 or 1: one partition). A run
	// lives in partition [Names.PartitionOf] of its id; the partitioned stores (the calls,
	// runs and batches buckets, the results and audit streams) exist once per partition.
	// Deployments record P at setup; services and clients read it from there.
	Partitions int
	// part is the partition whose stores the run-less methods (CallsBucket,
	// ResultsStream …) name: 0 unless the Names came from [Names.Partition].
	part int
}

// NewNames returns the names for prefix, or for [DefaultPrefix] when prefix is empty.
func NewNames(prefix string) Names {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Names{Prefix: prefix}
}

// PartitionCount is the number of partitions, at least 1.
func (n Names) PartitionCount() int { return max(n.Partitions, 1) }

// PartitionOf is the partition of run runID: the FNV-1a 32-bit hash of the id's bytes
// modulo the partition count (docs/protocol.md, "Partitions"). It is stable: a run never
// changes partition while P does not change.
func (n Names) PartitionOf(runID string) int {
	p := n.PartitionCount()
	if p == 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(runID); i++ {
		h ^= uint32(runID[i])
		h *= 16777619
	}
	return int(h % uint32(p))
}

// Partition returns the names as seen from partition k: its run-less methods name
// partition k's stores (CallsBucket, RunsBucket, BatchesBucket, ResultsStream,
// AuditStream, their record streams and filters). Partition 0 keeps the names of a
// deployment with one partition; partition k ≥ 1 suffixes its buckets "_p{k}" and its
// streams "_P{k}" and puts its subjects under "{prefix}.p{k}.". It panics when k is out
// of range.
func (n Names) Partition(k int) Names {
	if k < 0 || k >= n.PartitionCount() {
		panic(fmt.Sprintf("contracts: partition %d of %d", k, n.PartitionCount()))
	}
	n.part = k
	return n
}

// Of returns the names as seen from the partition of run runID ([Names.Partition] of
// [Names.PartitionOf]).
func (n Names) Of(runID string) Names { return n.Partition(n.PartitionOf(runID)) }

// PartitionIndex is the partition the run-less methods of n name.
func (n Names) PartitionIndex() int { return n.part }

// EachPartition returns the names of every partition, 0 first.
func (n Names) EachPartition() []Names {
	out := make([]Names, n.PartitionCount())
	for k := range out {
		out[k] = n.Partition(k)
	}
	return out
}

// bucketSuffix and streamSuffix tell the stores of partition k ≥ 1 from partition 0's.
func (n Names) bucketSuffix() string {
	if n.part == 0 {
		return ""
	}
	return "_p" + strconv.Itoa(n.part)
}

func (n Names) streamSuffix() string {
	if n.part == 0 {
		return ""
	}
	return "_P" + strconv.Itoa(n.part)
}

// partPrefix is the subject prefix of n's partition: the prefix itself for partition 0,
// "{prefix}.p{k}" for k ≥ 1, so the subject filters of two partitions never overlap.
func (n Names) partPrefix() string {
	if n.part == 0 {
		return n.Prefix
	}
	return n.Prefix + ".p" + strconv.Itoa(n.part)
}

// PartitionsMetadataKey is the key of the submissions stream's metadata under which
// `awaken setup` records the deployment's partition count; a deployment without it has
// one partition.
const PartitionsMetadataKey = "awaken_partitions"

func (n Names) upper() string {
	b := []byte(n.Prefix)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '.' || c == '-':
			b[i] = '_'
		}
	}
	return string(b)
}

// Public subjects (normative).

// SubmitSubject is where platforms publish batches.
func (n Names) SubmitSubject() string { return n.Prefix + ".batches.submit" }

// RejectedSubject carries io.awaken.toolbatch.rejected.v1.
func (n Names) RejectedSubject() string { return n.Prefix + ".batches.rejected" }

// UnchangedSubject is where the batcher tells the submitters of runID's batches that a
// submission was identical content of a batch it already holds, so nothing new will be
// published for it ({prefix}.unchanged.{run}, [BatchUnchanged]). Core NATS, at-most-once:
// no stream captures it (the submissions stream holds {prefix}.batches.>), nothing is
// stored, and a client that misses the notice finds the batch by asking.
func (n Names) UnchangedSubject(runID string) string { return n.Prefix + ".unchanged." + runID }

// UnchangedWildcard matches the unchanged notices of every run.
func (n Names) UnchangedWildcard() string { return n.Prefix + ".unchanged.>" }

// ResultsSubject carries the ordered results and the finalized event of a run.
func (n Names) ResultsSubject(runID string) string {
	return n.Of(runID).partPrefix() + ".results." + runID
}

// ResultCorrectionsSubject carries the corrections of a run's published results
// ([ResultCorrected]). The results stream stores it beside the results, under a subject
// of its own: a reader of the results subject never meets one, and the publisher stays
// the only writer of results (the gate publishes corrections).
func (n Names) ResultCorrectionsSubject(runID string) string {
	return n.Of(runID).partPrefix() + ".corrections." + runID
}

// ResultCorrectionsWildcard matches the corrections of every run of n's partition.
func (n Names) ResultCorrectionsWildcard() string { return n.partPrefix() + ".corrections.>" }

// ResultsWildcard matches the results of every run of n's partition.
func (n Names) ResultsWildcard() string { return n.partPrefix() + ".results.>" }

// CommittedResultsSubject is where the results stream republishes each result and
// finalized event of runID once it is stored ({prefix}.committed.results.{run}): a plain
// subscriber there sees only committed messages, each with its stream sequence
// (Nats-Sequence) and the previous one of the run (Nats-Last-Sequence). Delivery is
// at-most-once; the stream stays the record.
func (n Names) CommittedResultsSubject(runID string) string {
	return n.Prefix + ".committed.results." + runID
}

// CommittedResultsWildcard matches the committed results of every run.
func (n Names) CommittedResultsWildcard() string { return n.Prefix + ".committed.results.>" }

// EventsSubject carries what a run's events stream stores: the awaiting facts, the
// progress of its running tools and the announcement that it ended.
func (n Names) EventsSubject(runID string) string { return n.Prefix + ".events." + runID }

// FactsSubject carries the live tool_call and tool_result facts of a run
// ({prefix}.facts.{run}): core NATS, no stream stores them. Each is a projection of
// what is already stored — the call record of the decision and its audit record, the
// results message — published once that is stored, so a call's path stores nothing for
// them; a reader that needs the history reads those.
func (n Names) FactsSubject(runID string) string { return n.Prefix + ".facts." + runID }

// FactsWildcard matches the live facts of every run.
func (n Names) FactsWildcard() string { return n.Prefix + ".facts.>" }

// TicketOpenedSubject, TicketResumeSubject, TicketResolvedSubject and TicketRejectedSubject
// carry the approval protocol. The resume commands, which clients publish, are stored in
// the control stream; the gate's opened, resolved and rejected in the tickets stream.
func (n Names) TicketOpenedSubject() string   { return n.Prefix + ".tickets.opened" }
func (n Names) TicketResumeSubject() string   { return n.Prefix + ".tickets.resume" }
func (n Names) TicketResolvedSubject() string { return n.Prefix + ".tickets.resolved" }
func (n Names) TicketRejectedSubject() string { return n.Prefix + ".tickets.rejected" }

// TicketResumeAPISubject carries the resume commands of the api's doors (HTTP, console,
// micro), whose actor the api authenticated. deploy/nats/auth.conf lets only the api user
// publish there; the gate records the actor of a command on [Names.TicketResumeSubject]
// as claimed (CallRecord.ResolvedActorClaimed), never as authenticated.
func (n Names) TicketResumeAPISubject() string { return n.Prefix + ".tickets.resume.api" }

// TicketExpireSubject receives scheduled deadline and due-time triggers (internal). It and
// the schedule subjects live in the timers stream, apart from the ticket protocol, because
// message schedules are enabled there and only the gate may write there.
func (n Names) TicketExpireSubject() string { return n.Prefix + ".tickets.timer" }

// TicketScheduleSubject is the schedule-holding subject for a ticket's timer; one per
// correlation id so a new schedule replaces an old one.
func (n Names) TicketScheduleSubject(correlationID string) string {
	return n.Prefix + ".tickets.schedule." + correlationID
}

// RunCancelSubject receives run cancellation commands.
func (n Names) RunCancelSubject() string { return n.Prefix + ".runs.cancel" }

// CallCancelSubject receives the cancellation commands of single calls. It lies under
// "{prefix}.runs.>", so the control stream stores it beside the run cancellations.
func (n Names) CallCancelSubject() string { return n.Prefix + ".runs.calls.cancel" }

// CallResolveSubject receives the resolutions of indeterminate calls ([CallResolve]). It
// lies under "{prefix}.runs.>", so the control stream stores it beside the cancellations.
func (n Names) CallResolveSubject() string { return n.Prefix + ".runs.calls.resolve" }

// CallStopSubject is where the gate tells the executors (core NATS, no stream captures it)
// to stop bodies in flight: one call's, with the [CallCancel] the gate handled, or every
// body of a run, with the [RunCancel] — sent once the gate recorded the run's end and
// sealed its batch, so no executor commits a call of the run before the seal.
func (n Names) CallStopSubject() string { return n.Prefix + ".calls.stop" }

// AuditSubject carries PermissionDecided records of a run.
func (n Names) AuditSubject(runID string) string {
	return n.Of(runID).partPrefix() + ".audit." + runID
}

// AuditPrefix is the prefix of the audit subjects of n's partition ("{prefix}.audit." in
// partition 0): every subject its audit stream holds starts with it.
func (n Names) AuditPrefix() string { return n.partPrefix() + ".audit." }

// AuditWildcard matches every subject of n's partition's audit stream.
func (n Names) AuditWildcard() string { return n.partPrefix() + ".audit.>" }

// DeadLetterSubject keeps a poisoned message of consumer with the reason in its headers.
func (n Names) DeadLetterSubject(consumer string) string {
	return n.Prefix + ".deadletter." + consumer
}

// Streams.
func (n Names) SubmissionsStream() string { return n.upper() + "_SUBMISSIONS" }
func (n Names) ResultsStream() string     { return n.upper() + "_RESULTS" + n.streamSuffix() }
func (n Names) TicketsStream() string     { return n.upper() + "_TICKETS" }
func (n Names) TimersStream() string      { return n.upper() + "_TIMERS" }
func (n Names) EventsStream() string      { return n.upper() + "_EVENTS" }
func (n Names) AuditStream() string       { return n.upper() + "_AUDIT" + n.streamSuffix() }

// ClaimsStream holds what clients record of their own doings ({prefix}.claims.>), apart
// from the audit stream: only services write the audit stream, whose records they chain,
// sign and deduplicate by id, so no client can store a message under one of their ids.
func (n Names) ClaimsStream() string     { return n.upper() + "_CLAIMS" }
func (n Names) DeadLetterStream() string { return n.upper() + "_DEADLETTER" }
func (n Names) ControlStream() string    { return n.upper() + "_CONTROL" }

// KV buckets.
func (n Names) BatchesBucket() string  { return n.upper() + "_batches" + n.bucketSuffix() }
func (n Names) CallsBucket() string    { return n.upper() + "_calls" + n.bucketSuffix() }
func (n Names) TicketsBucket() string  { return n.upper() + "_tickets" }
func (n Names) CountersBucket() string { return n.upper() + "_counters" }

// ToolsBucket holds the descriptors each executor publishes of the tools it serves, one
// key per target ([ToolDescriptorsKey]); the api reads them to build the tool catalog.
func (n Names) ToolsBucket() string { return n.upper() + "_tools" }

// ToolDescriptorsKey is the key under which the executor of target publishes the JSON list
// of the descriptors of the tools it serves.
func ToolDescriptorsKey(target ToolExecutionTarget) string { return string(target) }

// ToolsListSubject is the micro endpoint of the api that answers the tool catalog.
func (n Names) ToolsListSubject() string { return n.Prefix + ".api.tools.list" }

// ToolPausesBucket holds one [ToolPause] per paused tool, keyed by [ToolPauseKey]. A
// resume deletes the key.
func (n Names) ToolPausesBucket() string { return n.upper() + "_tool_pauses" }

// LimitsBucket is the ledger of the host policy's limits: one key per limit, key value and
// window ([LimitLedgerKey]), holding the operations it counted ([LimitLedgerEntry]),
// updated by compare-and-swap by the gate.
func (n Names) LimitsBucket() string { return n.upper() + "_limits" }

// ToolPauseAuditSubject carries the [ToolPauseAudit] records. It lies under the audit
// stream's subjects but can never be a run's audit subject: run ids hold no dots.
func (n Names) ToolPauseAuditSubject() string { return n.Prefix + ".audit.tools.pause" }

// ReconcileAuditSubject carries the [ReconcileAudit] records of a run's calls. It lies
// under the audit stream's subjects but can never be a run's audit subject (one token
// more); the executors may publish here and nowhere else under the audit subjects.
func (n Names) ReconcileAuditSubject(runID string) string {
	return n.Of(runID).partPrefix() + ".audit.reconcile." + runID
}

// MCPCallAuditSubject carries the [MCPCallAudit] records of the api's MCP door (/mcp),
// signed like every record of the audit stream. It lies under the audit stream's subjects
// but can never be a run's audit subject: run ids hold no dots.
func (n Names) MCPCallAuditSubject() string { return n.Prefix + ".audit.mcp.calls" }

// AuditCheckpointSubject carries the gate's periodic checkpoints of every audit chain's
// head (pkg/auditchain.Checkpoint), chained and signed like every record of the audit
// stream, so a chain whose oldest records retention removed still verifies from one. It
// lies under the audit stream's subjects but can never be a run's: run ids hold no dots.
func (n Names) AuditCheckpointSubject() string { return n.partPrefix() + ".audit.checkpoint.heads" }

// MCPCallClaimSubject carries the [MCPCallAudit] records of `awaken mcp-serve`, the stdio
// door a platform runs with its own credentials: the platform's account of its calls, in
// the claims stream ([Names.ClaimsStream]), outside the signed audit trail.
func (n Names) MCPCallClaimSubject() string { return n.Prefix + ".claims.mcp.calls" }

// ToolsPauseSubject and ToolsResumeSubject are the micro endpoints of the api that pause
// and resume a tool.
func (n Names) ToolsPauseSubject() string  { return n.Prefix + ".api.tools.pause" }
func (n Names) ToolsResumeSubject() string { return n.Prefix + ".api.tools.resume" }

// RunsBucket holds one [RunRecord] per run, keyed by [RunKey].
func (n Names) RunsBucket() string { return n.upper() + "_runs" + n.bucketSuffix() }

// RunKey is the KV key of a run record: the run id itself (run ids are subject-safe).
func RunKey(runID string) string { return runID }

// BatchKey is the KV key of a batch record. Batch ids contain ':' which KV keys do not
// allow, so keys use the subject-safe parts instead.
func BatchKey(runID string, step int64) string {
	return runID + "." + strconv.FormatInt(step, 10)
}

// CallKeyNoTarget is the first token of the key of a call that no executor runs (an
// unknown tool, a client-executed one): only the gate and the batcher write such records.
const CallKeyNoTarget = "none"

// CallKey is the KV key of one call record (one per operation id):
// {target}.{run_id}.{step}.{call_key}, the call id encoded by [EncodeCallID] and the
// first token the executor target pinned for the call ([CallKeyNoTarget] when none). The
// target leads so that an executor consumes, and its NATS user may write, only the
// records of its own target ($KV.{calls}.{target}.>).
func CallKey(target ToolExecutionTarget, runID string, step int64, callID string) string {
	return targetToken(target) + "." + OperationKey(runID, step, callID)
}

// CallKeyOf is the key of call i of b, with the target of its pin.
func CallKeyOf(b *BatchRecord, i int) string {
	var target ToolExecutionTarget
	if i < len(b.Pinned) {
		target = b.Pinned[i].Target
	}
	return CallKey(target, b.Submission.RunID, b.Submission.Step, b.Submission.Calls[i].CallID)
}

func targetToken(target ToolExecutionTarget) string {
	if target == "" {
		return CallKeyNoTarget
	}
	return string(target)
}

// OperationKey is the subject-safe form of an operation id, {run_id}.{step}.{call_key}:
// the key of the body-run ledger, and the part of a call key after its target.
func OperationKey(runID string, step int64, callID string) string {
	return BatchKey(runID, step) + "." + EncodeCallID(callID)
}

// CallKeysOfBatch matches every call record of one batch, whatever its target.
func CallKeysOfBatch(runID string, step int64) string { return "*." + BatchKey(runID, step) + ".*" }

// CallKeysOfRun matches every call record of one run.
func CallKeysOfRun(runID string) string { return "*." + runID + ".>" }

// ParseCallKey splits a call key made by [CallKey] into its target token, run id, step and
// call id. Run ids hold no dots and steps are decimal, so the split is unambiguous.
func ParseCallKey(key string) (target ToolExecutionTarget, runID string, step int64, callID string, err error) {
	token, rest, ok := strings.Cut(key, ".")
	if !ok || token == "" {
		return "", "", 0, "", fmt.Errorf("%w: call key %q has no target", ErrInvalidID, key)
	}
	run, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", 0, "", fmt.Errorf("%w: call key %q has no step", ErrInvalidID, key)
	}
	stepText, callToken, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(callToken, ".") {
		return "", "", 0, "", fmt.Errorf("%w: call key %q is not target.run.step.call", ErrInvalidID, key)
	}
	step, err = strconv.ParseInt(stepText, 10, 64)
	if err != nil || step < 0 {
		return "", "", 0, "", fmt.Errorf("%w: call key %q has no valid step", ErrInvalidID, key)
	}
	if err := ValidateID("run_id", run); err != nil {
		return "", "", 0, "", fmt.Errorf("%w: call key %q: %w", ErrInvalidID, key, err)
	}
	if callID, err = DecodeCallID(callToken); err != nil {
		return "", "", 0, "", fmt.Errorf("%w: call key %q: %w", ErrInvalidID, key, err)
	}
	if token != CallKeyNoTarget {
		target = ToolExecutionTarget(token)
	}
	return target, run, step, callID, nil
}

// RecordSubject is the subject on which the key-value bucket stores the revisions of key:
// a KV write is a message on it, in the bucket's stream [RecordStream].
func RecordSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// RecordStream is the stream that holds the revisions of a key-value bucket.
func RecordStream(bucket string) string { return "KV_" + bucket }

// CallRecordsStream is the stream of the calls bucket: every call-record revision is a
// message of it, and the terminal ones ([TypeCallOutput]) are the work of the publisher
// and of the gate's sequential dispatch.
func (n Names) CallRecordsStream() string { return RecordStream(n.CallsBucket()) }

// CallRecordSubject is the subject of the revisions of the call record under callKey
// ([CallKey]); a terminal one, written as a [TypeCallOutput] CloudEvent, is the call's
// output announcement.
func (n Names) CallRecordSubject(callKey string) string {
	return RecordSubject(n.Partition(n.CallKeyPartition(callKey)).CallsBucket(), callKey)
}

// CallKeyPartition is the partition of the run a call key (or a pattern of call keys
// naming the run, [CallKeysOfRun]) belongs to: its second token is the run id. A key
// with no run token is partition 0's.
func (n Names) CallKeyPartition(callKey string) int {
	_, rest, _ := strings.Cut(callKey, ".")
	run, _, _ := strings.Cut(rest, ".")
	return n.PartitionOf(run)
}

// BatchKeyPartition is the partition of the run a batch or run key ([BatchKey],
// [RunKey]) belongs to: its first token is the run id.
func (n Names) BatchKeyPartition(key string) int {
	run, _, _ := strings.Cut(key, ".")
	return n.PartitionOf(run)
}

// RecordKeyOf returns the key a revision's subject names in bucket of any partition
// (bucket being partition 0's name: CallsBucket, RunsBucket or BatchesBucket), with the
// partition; ok is false when subject is no revision of that bucket.
func (n Names) RecordKeyOf(bucket func(Names) string, subject string) (key string, partition int, ok bool) {
	for k := range n.PartitionCount() {
		if key, ok := strings.CutPrefix(subject, RecordSubject(bucket(n.Partition(k)), "")); ok {
			return key, k, true
		}
	}
	return "", 0, false
}

// TargetCallRecordsFilter matches the revisions of the call records of one executor target:
// what its executor consumes, and all its NATS user may write of the calls bucket.
func (n Names) TargetCallRecordsFilter(target ToolExecutionTarget) string {
	return RecordSubject(n.CallsBucket(), targetToken(target)+".>")
}

// CallRecordsFilter matches the revisions of every call record.
func (n Names) CallRecordsFilter() string { return RecordSubject(n.CallsBucket(), ">") }

// RunRecordsStream is the stream of the runs bucket: the revision that records a batch
// ([TypeBatchRecorded]) is the work of the gate.
func (n Names) RunRecordsStream() string { return RecordStream(n.RunsBucket()) }

// RunRecordSubject is the subject of the revisions of run runID's record; the one that
// records a batch, written as a [TypeBatchRecorded] CloudEvent, is the gate's work.
func (n Names) RunRecordSubject(runID string) string {
	return RecordSubject(n.Of(runID).RunsBucket(), RunKey(runID))
}

// RunRecordsFilter matches the revisions of every run record.
func (n Names) RunRecordsFilter() string { return RecordSubject(n.RunsBucket(), ">") }

// PartitionsOf reads the partition count a deployment recorded in its submissions
// stream's metadata ([PartitionsMetadataKey]); a deployment without the key has one.
func PartitionsOf(metadata map[string]string) (int, error) {
	v, ok := metadata[PartitionsMetadataKey]
	if !ok {
		return 1, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 {
		return 0, fmt.Errorf("%w: recorded partition count %q", ErrInvalidID, v)
	}
	return p, nil
}
