package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// The batch door: a platform without a NATS client submits a batch and reads its results
// over HTTP. The api never decides anything about a batch itself: it runs the batcher's
// pure validation (so a malformed submission is refused at once, with the batcher's code),
// then publishes the submission on the submissions subject exactly as pkg/client does, and
// reads the results from the results stream. Exactly-once, conflicts and every stateful
// check stay the batcher's.

// MaxWait bounds the wait query parameter of POST /v1/batches.
const MaxWait = 60 * time.Second

func batchResults(b *client.BatchResult) httpapi.BatchResults {
	res := b.Results
	if res == nil {
		res = []contracts.ToolResultEvent{}
	}
	return httpapi.BatchResults{BatchID: b.BatchID, Results: res, Finalized: b.Finalized}
}

// StatusForRejectCode maps a batcher rejection code to the HTTP status of the batch door:
// 409 Conflict for what depends on the pipeline's state (conflict, run_busy,
// run_cancelled, run_ended, stale_step, and any code the pure validation cannot produce), 503 when the batcher
// could not record the batch (exhausted), 400 for a malformed submission.
func StatusForRejectCode(code string) int {
	switch contracts.RejectCode(code) {
	case contracts.RejectConflict, contracts.RejectRunBusy, contracts.RejectRunCancelled, contracts.RejectRunEnded, contracts.RejectStaleStep:
		return http.StatusConflict
	case "exhausted":
		return http.StatusServiceUnavailable
	case contracts.RejectWrongType, contracts.RejectMissingAttribute, contracts.RejectMissingCloudEventHeaders, contracts.RejectUnsupportedContent,
		contracts.RejectInvalidJSON, contracts.RejectInvalidUTF8, contracts.RejectTooLarge, contracts.RejectTooDeep,
		contracts.RejectUnknownField, contracts.RejectInvalidID, contracts.RejectInvalidStep, contracts.RejectInvalidField,
		contracts.RejectEmptyBatch, contracts.RejectDuplicateCall, contracts.RejectTooManyCalls, contracts.RejectInvalidPolicy:
		return http.StatusBadRequest
	}
	return http.StatusConflict
}

// parseWait reads the wait query parameter: a Go duration from 0 to [MaxWait].
func parseWait(q url.Values) (wait time.Duration, given bool, err error) {
	if !q.Has("wait") {
		return 0, false, nil
	}
	wait, err = time.ParseDuration(q.Get("wait"))
	switch {
	case err != nil:
		return 0, false, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "wait %q is not a duration such as 30s", q.Get("wait"))
	case wait < 0 || wait > MaxWait:
		return 0, false, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "wait %s is not between 0s and %s", wait, MaxWait)
	}
	return wait, true, nil
}

// httpSubmit is POST /v1/batches.
func (s *Service) httpSubmit(w http.ResponseWriter, r *http.Request) {
	wait, waiting, err := parseWait(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if !errors.As(err, &mbe) {
			s.writeError(w, r, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "reading the request body: %v", err))
			return
		}
		// data holds one byte more than a submission may have: the decoder below refuses
		// it as too_large, in the batcher's words.
	}
	// The batcher's own decoder: every code a submission can be refused with without
	// looking at any state comes from here, before anything is published.
	sub, err := contracts.DecodeSubmission(data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	batchID := sub.BatchID()
	// Every POST is its own attempt with its own event id: the stream never drops it as a
	// duplicate of an earlier POST of the same content (which may have been refused with
	// run_busy), so each reaches the batcher and gets its answer. Exactly-once does not
	// rest on this id: the batcher's record makes identical content of an accepted batch a
	// no-op whatever the id.
	eventID := client.AttemptEventID(*sub)
	log := s.log.With().Str("batch_id", batchID).Str("run_id", sub.RunID).Str("event_id", eventID).Logger()
	if !waiting {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.ResolveTimeout)
		defer cancel()
		if _, err := s.client.SubmitAs(ctx, *sub, eventID); err != nil {
			s.writeError(w, r, internalErr(err))
			return
		}
		log.Info().Str("remote", r.RemoteAddr).Msg("batch submitted over http")
		writeJSON(w, http.StatusAccepted, httpapi.BatchAccepted{BatchID: batchID})
		return
	}
	if res, ok := s.publishedResults(r.Context(), sub); ok {
		log.Info().Str("remote", r.RemoteAddr).Msg("batch resubmitted over http with the content it was published with; answered from its results")
		writeJSON(w, http.StatusOK, batchResults(res))
		return
	}
	release, err := s.waits.take("too many waiting submissions; retry, or submit without wait")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	// The submission gets ResolveTimeout, the wait starts once it is stored; a stopping
	// api ends the wait early (the caller gets pending and reads the results later).
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.ResolveTimeout+wait)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	res, err := s.client.SubmitAndWait(ctx, *sub, client.WaitAtMost(wait), client.WithEventID(eventID))
	var rejected *client.RejectedError
	var pending *client.PendingError
	switch {
	case err == nil:
		log.Info().Str("remote", r.RemoteAddr).Msg("batch submitted over http and published")
		writeJSON(w, http.StatusOK, batchResults(res))
	case errors.As(err, &pending):
		log.Info().Str("remote", r.RemoteAddr).Int("open_tickets", len(pending.Tickets)).Msg("batch submitted over http; still pending when the wait ended")
		writeJSON(w, http.StatusAccepted, httpapi.BatchPending{BatchID: batchID, Status: httpapi.StatusPending, Tickets: httpapi.PendingTickets(pending.Tickets)})
	case errors.Is(err, client.ErrPending):
		log.Info().Str("remote", r.RemoteAddr).Msg("batch submitted over http; still pending when the wait ended")
		writeJSON(w, http.StatusAccepted, httpapi.BatchPending{BatchID: batchID, Status: httpapi.StatusPending})
	case errors.As(err, &rejected):
		s.writeError(w, r, &httpapi.Error{Code: rejected.Code, Message: rejected.Message, Status: StatusForRejectCode(rejected.Code), Err: err})
	default:
		s.writeError(w, r, internalErr(err))
	}
}

// publishedResults returns the results of sub's batch when the batch has finished with
// sub's content and its results are on the stream. The batcher settles such a
// resubmission as a no-op, so the results are read instead of the submission published
// again. A finished batch is finalized before it is archived as published — the
// publisher archives it after the results are out — so both phases are asked of the
// stream, the authority on whether the results are out. ok is false in every other case
// (no such batch, still open, other content, results not out yet or past their
// retention), which takes the ordinary path through the batcher.
func (s *Service) publishedResults(ctx context.Context, sub *contracts.BatchSubmission) (res *client.BatchResult, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
	defer cancel()
	rec, err := s.reader.BatchRecord(ctx, sub.BatchID())
	if err != nil || rec.Phase == contracts.BatchPhaseOpen || rec.Hash != sub.Hash() {
		return nil, false
	}
	res, err = s.client.Results(ctx, sub.RunID, sub.Step)
	return res, err == nil
}

// httpBatchResults is GET /v1/batches/{batch_id}/results.
func (s *Service) httpBatchResults(w http.ResponseWriter, r *http.Request) {
	batchID := r.PathValue("batch_id")
	rec, err := s.reader.BatchRecord(r.Context(), batchID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pending := httpapi.BatchPending{BatchID: batchID, Status: httpapi.StatusPending}
	if rec.Phase == contracts.BatchPhaseOpen {
		// Best effort: the tickets name what the batch waits on; without them it is still pending.
		tctx, cancel := context.WithTimeout(r.Context(), s.opts.ResolveTimeout)
		defer cancel()
		if ts, err := s.client.BatchTickets(tctx, rec.Submission.RunID, rec.Submission.Step); err == nil {
			pending.Tickets = httpapi.PendingTickets(ts)
		}
		writeJSON(w, http.StatusAccepted, pending)
		return
	}
	// Finalized or published: the stream is the authority on whether the results are out.
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.ResolveTimeout)
	defer cancel()
	res, err := s.client.Results(ctx, rec.Submission.RunID, rec.Submission.Step)
	switch {
	case errors.Is(err, client.ErrNotPublished) && rec.Phase == contracts.BatchPhasePublished:
		// Published, but the stream no longer holds it (its retention ended).
		s.writeError(w, r, apiErr(http.StatusNotFound, httpapi.CodeNotFound, "the results of %s are no longer on the results stream", batchID))
	case errors.Is(err, client.ErrNotPublished):
		writeJSON(w, http.StatusAccepted, pending)
	case err != nil:
		s.writeError(w, r, internalErr(err))
	default:
		writeJSON(w, http.StatusOK, batchResults(res))
	}
}

// serveRunResults is GET /v1/runs/{run_id}/results: a server-sent event per published
// batch of the run, in publication order, from the first (or from after the batch whose
// event id the client sends as Last-Event-ID) and then as they are published, until the
// client goes away or the api stops. Each connection holds one ordered consumer of the
// results stream and at most one batch in memory; at most MaxStreams run streams are open
// at once.
func (s *Service) serveRunResults(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("run_id")
	if err := contracts.ValidateID("run_id", runID); err != nil {
		s.writeError(w, r, &httpapi.Error{Code: httpapi.CodeInvalidRequest, Message: err.Error(), Status: http.StatusBadRequest, Err: err})
		return
	}
	var after uint64
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			s.writeError(w, r, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "Last-Event-ID %q is not an event id of this stream", id))
			return
		}
		after = n
	}
	release, err := s.runStreams.take("too many result streams")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)() // Stop ends streams first

	batches := make(chan *client.BatchResult)
	followed := make(chan error, 1)
	var follower sync.WaitGroup
	follower.Go(func() {
		followed <- s.client.FollowRun(ctx, runID, after, func(b *client.BatchResult) bool {
			select {
			case batches <- b:
				return true
			case <-ctx.Done():
				return false
			}
		})
	})
	// The follower deletes its consumer on its way out; wait for it.
	defer follower.Wait()
	defer cancel()

	write := startEventStream(w)
	if !write("retry: 2000\n\n: following the results of " + runID + "\n\n") {
		return
	}
	ping := time.NewTicker(streamPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-followed:
			if ctx.Err() == nil {
				s.log.Warn().Err(err).Str("run_id", runID).Msg("run results stream ended")
			}
			return
		case <-ping.C:
			if !write(": ping\n\n") {
				return
			}
		case b := <-batches:
			data, err := json.Marshal(batchResults(b))
			if err != nil {
				s.log.Error().Err(err).Str("run_id", runID).Str("batch_id", b.BatchID).Msg("run results stream: encode batch")
				return
			}
			if !write(formatEvent(sseEvent{id: strconv.FormatUint(b.Sequence, 10), name: httpapi.EventRunBatch, data: data})) {
				return
			}
		}
	}
}

// httpBatches is GET /v1/batches: the views of the most recent batches ([readmodel.Reader.Batches]).
func (s *Service) httpBatches(w http.ResponseWriter, r *http.Request) {
	q := readmodel.BatchQuery{RunID: r.URL.Query().Get("run_id")}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.writeError(w, r, apiErr(http.StatusBadRequest, httpapi.CodeInvalidRequest, "limit must be a positive integer"))
			return
		}
		q.Limit = n
	}
	bs, err := s.reader.Batches(r.Context(), q)
	s.reply(w, r, httpapi.BatchList{Batches: bs}, err)
}

// httpBatch is GET /v1/batches/{batch_id}: one batch's full view ([readmodel.Reader.Batch]).
func (s *Service) httpBatch(w http.ResponseWriter, r *http.Request) {
	b, err := s.reader.Batch(r.Context(), r.PathValue("batch_id"))
	s.reply(w, r, b, err)
}
