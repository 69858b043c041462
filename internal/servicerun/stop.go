package servicerun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/telemetry"
)

// DefaultStopTimeout bounds a graceful stop: how long the services may take to finish the
// messages they are handling before the stop gives up on them.
const DefaultStopTimeout = 30 * time.Second

// ErrStoppedAtOnce is returned by [StopGracefully] when a second signal cut the drain
// short.
var ErrStoppedAtOnce = errors.New("stopped at once by a second signal: in-flight work is left to crash recovery")

// InFlight returns the messages every service of the stack is handling now, oldest first.
func (s *Stack) InFlight() []telemetry.Work {
	s.mu.Lock()
	tels := slices.Clone(s.tels)
	s.mu.Unlock()
	var out []telemetry.Work
	for _, t := range tels {
		out = append(out, t.InFlight()...)
	}
	slices.SortFunc(out, func(a, b telemetry.Work) int { return a.Since.Compare(b.Since) })
	return out
}

// WatchStopSignals is the two-signal stop of a process that serves, read from sigs (a
// channel [signal.Notify] feeds SIGINT and SIGTERM, or a test's): drain, a context of
// parent, ends at the first signal — stop gracefully — and now closes at the next signal
// after that, or after parent ended — stop at once, [StopGracefully]'s now. At that second
// signal sigs leaves [signal.Notify]'s list ([signal.Stop]), so a third gets the runtime's
// default, which kills the process. release ends the watch (and drain); call it once the
// stop is over.
func WatchStopSignals(parent context.Context, sigs chan os.Signal) (drain context.Context, now <-chan struct{}, release func()) {
	drain, cancel := context.WithCancel(parent)
	hard := make(chan struct{})
	released := make(chan struct{})
	stopAtOnce := func() {
		close(hard)
		signal.Stop(sigs)
	}
	go func() {
		select {
		case <-sigs:
			if parent.Err() != nil { // the drain began when parent ended: this is the second
				stopAtOnce()
				return
			}
			cancel()
		case <-drain.Done(): // parent ended: the drain begins without a signal
		case <-released:
			return
		}
		select {
		case <-sigs:
			stopAtOnce()
		case <-released:
		}
	}()
	return drain, hard, func() { close(released); cancel() }
}

// StopGracefully stops st as a first SIGINT or SIGTERM asks: it logs what the stop waits
// for (the messages in flight, by call, and until when), drains within timeout and logs
// again every few seconds while it waits. A close of now — the second signal — stops at
// once instead: the handlers are cancelled and their messages stay unacknowledged, so
// they are redelivered after a restart exactly as after a crash (a replay-safe call runs
// again; a never-replay call that had started ends indeterminate). That path returns
// [ErrStoppedAtOnce]. now may be nil.
func StopGracefully(st *Stack, log zerolog.Logger, timeout time.Duration, now <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	logWaiting(log, "stopping", st.InFlight(), deadline)
	stopped := make(chan error, 1)
	go func() { stopped <- st.Stop(ctx) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-stopped:
			if err != nil {
				log.Error().Err(err).Msg("stopped with work unfinished: its messages are redelivered after a restart (never-replay calls that had started end indeterminate)")
				return err
			}
			log.Info().Msg("stopped: every message in flight was finished")
			return nil
		case <-tick.C:
			logWaiting(log, "still stopping", st.InFlight(), deadline)
		case <-now:
			work := st.InFlight()
			log.Warn().Int("in_flight", len(work)).Strs("calls", workNames(work)).
				Msg("second signal: stopping at once; the calls in flight are left as after a crash — redelivered after a restart, a replay-safe call runs again, a never-replay call that had started ends indeterminate")
			cancel()
			<-stopped
			return ErrStoppedAtOnce
		}
	}
}

// logWaiting logs what a stop waits for.
func logWaiting(log zerolog.Logger, what string, work []telemetry.Work, deadline time.Time) {
	if len(work) == 0 {
		log.Info().Time("until", deadline).Msg(what + ": nothing in flight, draining")
		return
	}
	log.Warn().Int("in_flight", len(work)).Strs("calls", workNames(work)).Time("until", deadline).
		Msg(fmt.Sprintf("%s: waiting until %s for %d message(s) in flight to finish (%s); a second Ctrl-C stops at once",
			what, deadline.Format(time.TimeOnly), len(work), strings.Join(workNames(work), ", ")))
}

// workNames names each message in flight for a person: "service call_id of batch_id",
// or its event id when it is not about a call; at most 10, then a count.
func workNames(work []telemetry.Work) []string {
	const most = 10
	names := make([]string, 0, min(len(work), most+1))
	for i, w := range work {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(work)-most))
			break
		}
		switch {
		case w.CallID != "":
			names = append(names, fmt.Sprintf("%s %s of %s", w.Service, w.CallID, w.BatchID))
		case w.BatchID != "":
			names = append(names, fmt.Sprintf("%s %s", w.Service, w.BatchID))
		default:
			names = append(names, fmt.Sprintf("%s %s", w.Service, w.EventID))
		}
	}
	return names
}
