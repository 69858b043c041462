package bus

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// How a delivery is settled once its handler returned — acknowledged, retried after its
// back-off, dead-lettered with a reason — and the heartbeat that keeps a running one owned.

// settle applies the settlement rules to the handler's result. The heartbeat keeps running
// through the hooks and the dead-letter publish, and stops just before the message is
// acknowledged, nak'd or terminated.
func (s *Subscription) settle(ctx context.Context, log *zerolog.Logger, f *inflight, d Delivery, err error) Observation {
	m := f.msg
	if err == nil {
		f.hb.stop()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.spec.SettleTimeout)
		defer cancel()
		if aerr := m.DoubleAck(actx); aerr != nil {
			log.Warn().Err(aerr).Msg("acknowledgement not confirmed; the message may be redelivered")
			return Observation{Settlement: SettledAbandoned}
		}
		log.Debug().Msg("acked")
		return Observation{Settlement: SettledAck}
	}
	if delay, ok := RetryDelay(err); ok {
		log.Debug().Err(err).Dur("delay", delay).Msg("handler asked for a retry")
		return s.nak(log, f, delay)
	}
	if ctx.Err() != nil {
		// Hard stop: the failure is the cancellation, not the message. Give it back at once.
		log.Info().Err(err).Msg("handler interrupted by shutdown; message returned")
		return s.nak(log, f, 0)
	}
	if IsPermanent(err) {
		var rej *contracts.Rejection
		if !errors.As(err, &rej) {
			rej = &contracts.Rejection{Code: CodePermanent, Message: err.Error()}
		}
		return s.reject(ctx, log, f, d, rej)
	}
	if !s.spec.lastDelivery(d.NumDelivered) {
		delay := s.spec.backoff(d.NumDelivered)
		log.Warn().Err(err).Dur("delay", delay).Msg("handler failed; will retry")
		return s.nak(log, f, delay)
	}
	log.Error().Err(err).Int("max_deliver", s.spec.MaxDeliver).Msg("handler failed on the last delivery; exhausting")
	if s.spec.OnExhausted != nil {
		if herr := callHook(func() error { return s.spec.OnExhausted(ctx, d, err) }); herr != nil {
			log.Error().Err(herr).Msg("exhaustion hook failed; will retry")
			return s.nak(log, f, s.spec.backoff(d.NumDelivered))
		}
	}
	return s.deadLetter(ctx, log, f, d, CodeExhausted, err.Error())
}

// reject runs OnReject and dead-letters the message.
func (s *Subscription) reject(ctx context.Context, log *zerolog.Logger, f *inflight, d Delivery, rej *contracts.Rejection) Observation {
	log.Warn().Str("code", string(rej.Code)).Str("reason", rej.Message).Msg("message rejected")
	if s.spec.OnReject != nil {
		if herr := callHook(func() error { return s.spec.OnReject(ctx, d, rej) }); herr != nil {
			if !s.spec.lastDelivery(d.NumDelivered) {
				log.Warn().Err(herr).Msg("rejection hook failed; will retry")
				return s.nak(log, f, s.spec.backoff(d.NumDelivered))
			}
			log.Error().Err(herr).Msg("rejection hook failed on the last delivery; dead-lettering anyway")
		}
	}
	return s.deadLetter(ctx, log, f, d, rej.Code, rej.Message)
}

// deadLetter copies the raw message to the dead-letter subject and terminates it; if the
// copy is not confirmed the message is nak'd instead, so nothing is lost.
func (s *Subscription) deadLetter(ctx context.Context, log *zerolog.Logger, f *inflight, d Delivery, code contracts.RejectCode, reason string) Observation {
	m := f.msg
	reason = sanitizeHeader(reason)
	dl := nats.NewMsg(s.spec.Names.DeadLetterSubject(s.spec.Durable))
	for k, v := range m.Headers() {
		if len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
			continue
		}
		dl.Header[k] = append([]string(nil), v...)
	}
	seq := strconv.FormatUint(d.StreamSeq, 10)
	dl.Header.Set(HeaderDeadReason, reason)
	dl.Header.Set(HeaderDeadCode, string(code))
	dl.Header.Set(HeaderOriginalSubject, d.Subject)
	dl.Header.Set(HeaderOriginalStream, d.Stream)
	dl.Header.Set(HeaderOriginalSequence, seq)
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		dl.Header.Set(HeaderOriginalMsgID, id)
	} else if d.Event.ID != "" {
		// A record revision carries no Nats-Msg-Id (state.Store.WithAnnounce): its ce-id
		// is what names it.
		dl.Header.Set(HeaderOriginalMsgID, d.Event.ID)
	}
	dl.Header.Set(HeaderConsumer, s.spec.Durable)
	dl.Header.Set(HeaderDelivered, strconv.FormatUint(d.NumDelivered, 10))
	// One dead-letter copy per consumer and stream message, however often settlement is
	// retried; several consumers of one work message each keep their own copy.
	dl.Header.Set(jetstream.MsgIDHeader, "dl:"+s.spec.Durable+":"+d.Stream+":"+seq)
	dl.Data = m.Data()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.spec.SettleTimeout)
	defer cancel()
	if _, err := s.js.PublishMsg(pctx, dl); err != nil {
		log.Error().Err(err).Str("code", string(code)).Msg("dead-letter publish failed; message returned for redelivery")
		return s.nak(log, f, s.spec.backoff(d.NumDelivered))
	}
	f.hb.stop()
	if err := m.TermWithReason(string(code) + ": " + reason); err != nil {
		log.Warn().Err(err).Msg("terminate failed; the message will be redelivered and dead-lettered again (deduplicated)")
		return Observation{Settlement: SettledAbandoned}
	}
	log.Warn().Str("code", string(code)).Str("dead_letter", dl.Subject).Msg("message dead-lettered")
	return Observation{Settlement: SettledDeadLetter, Code: code}
}

// nak stops the heartbeat and returns the message for redelivery after delay.
func (s *Subscription) nak(log *zerolog.Logger, f *inflight, delay time.Duration) Observation {
	f.hb.stop()
	m := f.msg
	var err error
	if delay > 0 {
		err = m.NakWithDelay(delay)
	} else {
		err = m.Nak()
	}
	if err != nil {
		log.Warn().Err(err).Msg("nak failed; the message will be redelivered after the ack wait")
	}
	return Observation{Settlement: SettledNak}
}

// sanitizeHeader makes s safe as a header value: no control characters (a CR or LF would
// corrupt the NATS header block) and at most maxReasonLen bytes, cut on a rune boundary.
func sanitizeHeader(s string) string {
	if len(s) > maxReasonLen {
		cut := maxReasonLen
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// heartbeat calls InProgress on a message every period until stopped, so the server does
// not redeliver a message whose handler is still running (or waiting for a worker).
type heartbeat struct {
	mu      sync.Mutex
	msg     jetstream.Msg
	period  time.Duration
	timer   *time.Timer
	stopped bool
}

func startHeartbeat(m jetstream.Msg, period time.Duration) *heartbeat {
	h := &heartbeat{msg: m, period: period}
	h.mu.Lock()
	h.timer = time.AfterFunc(period, h.beat)
	h.mu.Unlock()
	return h
}

// beat sends one InProgress under the lock, so that once stop has returned no beat can
// reach the server after the message's settlement. InProgress is a plain publish.
func (h *heartbeat) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	_ = h.msg.InProgress() // best effort: a lost beat is covered by the next one
	h.timer.Reset(h.period)
}

// stop ends the heartbeat; after it returns no further InProgress is sent. Idempotent.
func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
}
