package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
)

func TestSetupAndWaitTopology(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		wantErr  bool
	}{
		{"one replica on one server", 1, false},
		// Refused at once, not retried until the deadline: no retry can cure it.
		{"three replicas on one server", 3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			_, js := srv.Conn(t)
			cfg := &config.Config{Storage: config.Storage{Replicas: tc.replicas}}
			log := zerolog.Nop()

			// Before setup, a service waiting for the topology waits (until its deadline).
			short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if err := app.WaitTopology(short, js, cfg.Names(), log); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitTopology before setup: %v, want a deadline error", err)
			}

			ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel2()
			start := time.Now()
			err := app.Setup(ctx, js, cfg, log)
			if tc.wantErr {
				if err == nil || time.Since(start) > 10*time.Second {
					t.Fatalf("Setup = %v after %s, want a prompt error", err, time.Since(start))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := app.Setup(ctx, js, cfg, log); err != nil {
				t.Fatalf("second Setup (idempotent): %v", err)
			}
			if err := app.WaitTopology(ctx, js, cfg.Names(), log); err != nil {
				t.Fatalf("WaitTopology after setup: %v", err)
			}
		})
	}
}
