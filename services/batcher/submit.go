package batcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// handleSubmit is the handler of io.awaken.toolbatch.requested.v1: decode and validate,
// then claim the run and record the batch in one write. That write is also the gate's work
// for the batch (its revision of the run record is announced, internal/pipeline
// records.go), so nothing more is published. A submission of a batch recorded before with
// the same content is a no-op, of which the submitter is told at once
// ([Service.publishUnchanged]). A rejection is returned as a [*contracts.Rejection]; the
// bus then runs [Service.submitRejected] and dead-letters the message.
func (s *Service) handleSubmit(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	sub, err := s.decodeSubmission(d.Event.Data)
	if err != nil {
		var rej *contracts.Rejection
		if errors.As(err, &rej) {
			return pipeline.Effects{}, rej
		}
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("batcher: decode submission: %w", err))
	}
	batchID := sub.BatchID()
	log := zerolog.Ctx(ctx).With().Str("batch_id", batchID).Str("run_id", sub.RunID).Logger()

	var rec, unchanged *contracts.BatchRecord
	return pipeline.Effects{Op: batchID, Log: &log, Steps: []pipeline.Effect{
		// The batch recorded and its run claimed, in one write that hands the batch to the gate.
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			rec, unchanged, err = s.record(ctx, sub)
			return rec != nil, err
		}, pipeline.ToGate),
		pipeline.Do(func(ctx context.Context) error {
			if unchanged != nil {
				s.publishUnchanged(ctx, d, unchanged)
				return nil
			}
			log.Info().Int("calls", len(sub.Calls)).Bool("parallel", rec.Parallel).Bool("parallel_declared", rec.ParallelDeclared).Msg("batch recorded; the gate takes it from the run record")
			return nil
		}),
	}}, nil
}

// decodeSubmission decodes and validates a submission ([contracts.DecodeSubmission]) and
// resolves the tool names of its calls and agent tools against the trusted registry
// ([config.Config.ResolveToolName]): a provider-safe name the catalog listed becomes the
// tool id it stands for, before the batch is hashed and pinned, so the record, the pin,
// the policies and the results all name the tool itself, and a batch sent with safe names
// is the same batch as one sent with the ids.
func (s *Service) decodeSubmission(data []byte) (*contracts.BatchSubmission, error) {
	sub, err := contracts.DecodeSubmission(data)
	if err != nil {
		return nil, err
	}
	cfg := s.env.Config
	for i := range sub.Calls {
		sub.Calls[i].ToolID = cfg.ResolveToolName(sub.Calls[i].ToolID)
	}
	for i, id := range sub.Agent.Tools {
		sub.Agent.Tools[i] = cfg.ResolveToolName(id)
	}
	return sub, nil
}

// record records sub's batch — the run's claim and the batch record in one
// compare-and-swap on the run record ([pipeline.Env.AcceptBatch]) — or finds the record a
// previous delivery or an earlier submission of the same batch wrote. It returns the
// record it wrote (created), or the record found when the batch was recorded before with
// the same content (unchanged: the gate has its work since that write), or the run's
// refusal (run_busy, run_cancelled, run_ended) of a batch it never recorded, or a
// conflict rejection when the stored batch has other content.
func (s *Service) record(ctx context.Context, sub *contracts.BatchSubmission) (created, unchanged *contracts.BatchRecord, err error) {
	log := zerolog.Ctx(ctx)
	rec := newRecord(s.env.Config, sub, s.env.Now())
	res, err := s.env.AcceptBatch(ctx, rec)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("batcher: batch %s: %w", sub.BatchID(), err)
	case res.Created:
		// Counted once: only the delivery whose write recorded the batch gets here.
		s.env.Telemetry.BatchAccepted()
		return &rec, nil, nil
	case res.Refused != nil:
		return nil, nil, res.Refused
	}
	cur := res.Existing
	if cur.Hash != rec.Hash {
		return nil, nil, contracts.Reject(contracts.RejectConflict,
			"batch %s was already submitted with different content", sub.BatchID())
	}
	// The write that recorded it was the gate's work: there is nothing to re-drive.
	log.Info().Str("phase", string(cur.Phase)).Msg("identical resubmission of a recorded batch; nothing to do but tell the submitter")
	return nil, cur, nil
}

// newRecord builds the batch record of sub: the whole submission, its hash, the pin of
// every call resolved from the trusted configuration (never from the submission), and
// its dispatch mode: sequential, the parallel-delegation branch, or declared parallel. The
// mode is pinned here, so a configuration change cannot alter an open batch.
func newRecord(cfg *config.Config, sub *contracts.BatchSubmission, now time.Time) contracts.BatchRecord {
	pinned := make([]contracts.PinnedCall, len(sub.Calls))
	for i, c := range sub.Calls {
		pinned[i] = cfg.Pin(c.ToolID)
	}
	declared := declaredParallel(cfg, sub)
	return contracts.BatchRecord{
		Submission:       *sub,
		Hash:             sub.Hash(),
		Pinned:           pinned,
		Parallel:         declared || parallel(cfg, sub),
		ParallelDeclared: declared,
		Phase:            contracts.BatchPhaseOpen,
		CreatedAt:        now,
	}
}

// declaredParallel reports whether every call of sub, more than one, is of a tool the
// host declares parallel. A batch with any other call keeps the sequential path.
func declaredParallel(cfg *config.Config, sub *contracts.BatchSubmission) bool {
	if len(sub.Calls) < 2 {
		return false
	}
	for _, c := range sub.Calls {
		if t, ok := cfg.Tool(c.ToolID); !ok || !t.Parallel || t.Kind == contracts.KindClientExecuted {
			return false
		}
	}
	return true
}

// parallel reports whether sub qualifies for the parallel-delegation branch (as the
// original runtime decides it): more than one call, every call to the same tool, and that tool a registered
// delegation tool that declares parallel completion. Visibility is not checked here: the
// gate's probe falls back to the sequential path when any call is not allowed.
func parallel(cfg *config.Config, sub *contracts.BatchSubmission) bool {
	if len(sub.Calls) < 2 {
		return false
	}
	id := sub.Calls[0].ToolID
	for _, c := range sub.Calls[1:] {
		if c.ToolID != id {
			return false
		}
	}
	t, ok := cfg.Tool(id)
	return ok && t.Kind == contracts.KindDelegation && t.ParallelCompletion
}

// submitRejected publishes io.awaken.toolbatch.rejected.v1 for a submission that the codec
// or the handler refused, before the bus dead-letters it. It runs for every rejection —
// an undecodable envelope, a wrong event type, an invalid payload, a conflict — so the
// platform always hears about a refused batch. The event id derives from the refused
// message's id, so a repeated settlement publishes it once.
func (s *Service) submitRejected(ctx context.Context, d bus.Delivery, rej *contracts.Rejection) error {
	eventID := submissionEventID(d)
	payload := contracts.BatchRejected{Code: string(rej.Code), Message: rej.Message, EventID: eventID}
	if runID, batchID, ok := submissionIdentity(deliveryBody(d), rej.Code); ok {
		payload.RunID, payload.BatchID = runID, batchID
	}
	if err := s.publishRejected(ctx, rejectionID(d), payload); err != nil {
		return err
	}
	s.env.Telemetry.BatchRejected(rej.Code)
	return nil
}

// rejectionID is the id of the rejection event answering the submission of d:
// "{ce-id}:rejected", or, when the envelope carries no id at all, an id derived from the
// stream position, which is just as stable across redeliveries.
func rejectionID(d bus.Delivery) string {
	id := submissionEventID(d)
	if id == "" {
		id = fmt.Sprintf("%s-%d", d.Stream, d.StreamSeq)
	}
	return pipeline.RejectedID(id)
}

// submitExhausted runs when a submission failed transiently on every delivery. If its
// batch was recorded, nothing is lost: that write is the gate's work, and the batch goes
// on from it. If no record could be written, the platform is told with a rejection of code
// exhausted, since nothing of the batch exists to finish.
func (s *Service) submitExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	sub, err := s.decodeSubmission(d.Event.Data)
	if err != nil {
		return nil // not reachable: a payload that does not decode is rejected, never retried
	}
	_, err = s.env.FreshBatch(ctx, sub.RunID, sub.Step)
	switch {
	case errors.Is(err, pipeline.ErrBatchNotFound):
		// Claiming the run and recording the batch are one write: nothing of it exists.
		zerolog.Ctx(ctx).Error().Err(cause).Str("batch_id", sub.BatchID()).
			Msg("submission exhausted before its batch was recorded; rejecting it")
		return s.publishRejected(ctx, rejectionID(d), contracts.BatchRejected{
			BatchID: sub.BatchID(), RunID: sub.RunID, Code: string(bus.CodeExhausted),
			Message: "the batch could not be recorded: " + cause.Error(), EventID: submissionEventID(d),
		})
	case err != nil:
		return fmt.Errorf("batcher: batch %s: read record after exhaustion: %w", sub.BatchID(), err)
	}
	zerolog.Ctx(ctx).Warn().Err(cause).Str("batch_id", sub.BatchID()).
		Msg("submission exhausted after its batch was recorded; the gate has the batch from its record")
	return nil
}

// submissionEventID is the ce-id of the submission, read from the raw headers when the
// envelope did not decode, else its Nats-Msg-Id; empty when it has neither.
func submissionEventID(d bus.Delivery) string {
	if d.Event.ID != "" {
		return d.Event.ID
	}
	if d.Msg == nil {
		return ""
	}
	h := d.Msg.Headers()
	for k, v := range h {
		if len(v) > 0 && v[0] != "" && strings.EqualFold(k, cloudevent.HeaderID) {
			return v[0]
		}
	}
	return h.Get(jetstream.MsgIDHeader)
}

// deliveryBody is the submission payload of d: the event data when the envelope decoded,
// else the raw message body (a binary-mode message refused for its headers still carries
// the submission as its body).
func deliveryBody(d bus.Delivery) []byte {
	if d.EnvelopeDecoded() || d.Msg == nil {
		return d.Event.Data
	}
	return d.Msg.Data()
}

// submissionIdentity extracts the run id and batch id a refused submission names, so the
// rejection can be correlated with the batch. It reports false when the payload cannot be
// parsed (the rejection is about its bytes or its JSON) or names no valid run id; the
// batch id additionally needs a non-negative step. Only identifiers that pass
// [contracts.ValidateID] are echoed, never arbitrary input.
func submissionIdentity(data []byte, code contracts.RejectCode) (runID, batchID string, ok bool) {
	switch code {
	case contracts.RejectTooLarge, contracts.RejectInvalidUTF8, contracts.RejectTooDeep, contracts.RejectInvalidJSON:
		return "", "", false
	}
	if len(data) == 0 || len(data) > contracts.MaxSubmissionBytes || !utf8.Valid(data) {
		return "", "", false
	}
	var probe struct {
		RunID string `json:"run_id"`
		Step  *int64 `json:"step"`
	}
	if json.Unmarshal(data, &probe) != nil || contracts.ValidateID("run_id", probe.RunID) != nil {
		return "", "", false
	}
	if probe.Step != nil && *probe.Step >= 0 {
		batchID = contracts.BatchID(probe.RunID, *probe.Step)
	}
	return probe.RunID, batchID, true
}
