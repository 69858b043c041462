package app_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/health"
	"github.com/awaken-dev/awaken/internal/natstest"
)

// TestReadiness follows /readyz through a process's life: not ready before its services
// started, ready once started with every connection up, not ready when a connection is
// lost or the drain begins.
func TestReadiness(t *testing.T) {
	srv := natstest.Start(t)
	r := &app.Readiness{}
	h := health.New()
	r.Register(h)
	dial := r.Dial(func(name string) (*nats.Conn, error) { return nats.Connect(srv.URL(), nats.Name(name)) })
	ctx := context.Background()

	ready := func() bool { return h.Ready(ctx).Status == "ok" }
	if ready() {
		t.Fatal("ready before anything started")
	}
	a, err := dial("awaken-gate")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := dial("awaken-batcher")
	if err != nil {
		t.Fatal(err)
	}
	if ready() {
		t.Fatal("ready with connections but services not started")
	}
	r.SetStarted(true)
	if rep := h.Ready(ctx); rep.Status != "ok" {
		t.Fatalf("not ready once started: %v", rep.Failing)
	}
	b.Close()
	rep := h.Ready(ctx)
	if _, ok := rep.Failing["nats"]; !ok {
		t.Fatalf("ready with a closed connection: %+v", rep)
	}
	r.SetStarted(false)
	if _, ok := h.Ready(ctx).Failing["services"]; !ok {
		t.Fatal("ready while stopping")
	}
}
