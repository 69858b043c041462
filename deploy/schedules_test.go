package deploy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/servicerun"
)

// TestSecure_clientsCannotScheduleMessages: a message schedule is not bound by the
// publisher's grants — the server stores what it produces on the target subject, any
// subject of the stream. So the users that write a stream (platform and api write resume
// commands) must find message schedules refused there: a schedule aimed at the gate's timer
// subject would expire a ticket early, one aimed at tickets.opened would forge a ticket
// event, an "@every 1s" would flood the stream, and a purge would cancel a genuine timer.
// Real users and grants of deploy/nats/auth.conf on an embedded server, as `awaken dev
// --secure` runs them.
func TestSecure_clientsCannotScheduleMessages(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t)
	names := s.cfg.Names()
	ctx := ctxFor(t, time.Minute)
	connect := func(user string) jetstream.JetStream {
		js, err := jetstream.New(s.connect(t, user))
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin := connect(deploy.UserAdmin)
	if err := servicerun.Setup(ctx, admin, s.cfg, servicerun.NewLogger(nil, "error")); err != nil {
		t.Fatal(err)
	}
	genuineSchedule := names.TicketScheduleSubject("perm.run-1.1.c1")
	forgeries := []struct {
		name   string
		header nats.Header
	}{
		{"a timer that expires a ticket early", nats.Header{
			"Nats-Schedule": {"@at " + time.Now().UTC().Format(time.RFC3339)}, "Nats-Schedule-Target": {names.TicketExpireSubject()}}},
		{"a forged ticket event, every second", nats.Header{
			"Nats-Schedule": {"@every 1s"}, "Nats-Schedule-Target": {names.TicketOpenedSubject()}}},
		{"a flood of timers", nats.Header{
			"Nats-Schedule": {"@every 1s"}, "Nats-Schedule-Target": {names.TicketExpireSubject()}}},
		{"a purge of the gate's timer", nats.Header{
			"Nats-Schedule-Next": {"purge"}, "Nats-Scheduler": {genuineSchedule}}},
		// The api's resume subject records its actor as authenticated: a schedule there
		// would let the platform put a command where its grants forbid.
		{"a command on the api's resume subject", nats.Header{
			"Nats-Schedule": {"@at " + time.Now().UTC().Format(time.RFC3339)}, "Nats-Schedule-Target": {names.TicketResumeAPISubject()}}},
	}
	stored := func(stream, subject string) uint64 {
		t.Helper()
		st, err := admin.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	// Each user on the resume subject it may publish: the platform the public one, the
	// api its own.
	for user, resume := range map[string]string{deploy.UserPlatform: names.TicketResumeSubject(), deploy.UserAPI: names.TicketResumeAPISubject()} {
		js := connect(user)
		for _, f := range forgeries {
			t.Run(user+" cannot schedule "+f.name, func(t *testing.T) {
				before := stored(names.ControlStream(), resume)
				msg := &nats.Msg{Subject: resume, Header: f.header, Data: []byte(`{}`)}
				if ack, err := js.PublishMsg(ctx, msg); err == nil {
					t.Fatalf("the server stored the schedule (stream %s seq %d); want it refused", ack.Stream, ack.Sequence)
				}
				if after := stored(names.ControlStream(), resume); after != before {
					t.Fatalf("%d messages on %s after the refused schedule, want %d", after, resume, before)
				}
			})
		}
		// The refusal is of schedules only: the same user still publishes a resume command.
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: resume, Data: []byte(`{}`)}); err != nil {
			t.Fatalf("%s: plain resume command refused: %v", user, err)
		}
	}
	if n := stored(names.ControlStream(), names.TicketResumeAPISubject()); n != 1 {
		t.Errorf("%d messages on %s, want the api's one", n, names.TicketResumeAPISubject())
	}
	for _, stream := range []string{names.TicketsStream(), names.TimersStream(), names.ControlStream()} {
		for _, subject := range []string{names.TicketExpireSubject(), names.TicketOpenedSubject()} {
			if n := stored(stream, subject); n != 0 {
				t.Errorf("%d forged messages on %s in %s", n, subject, stream)
			}
		}
	}
	// The gate keeps its timers: it may schedule on the timers stream.
	gate := connect("gate")
	if _, err := gate.PublishMsg(ctx, &nats.Msg{Subject: genuineSchedule, Data: []byte(`{}`), Header: nats.Header{
		"Nats-Schedule": {"@at " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "Nats-Schedule-Target": {names.TicketExpireSubject()}}}); err != nil {
		t.Fatalf("gate: timer schedule refused: %v", err)
	}
}
