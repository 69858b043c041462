package config_test

import (
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
)

// TestRetention_periods: a kind takes its own value, else retention.default, else its
// built-in period; "forever" is 0; whole days are accepted.
func TestRetention_periods(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name, yaml string
		want       map[string]time.Duration
	}{
		{"built-in", "{}", map[string]time.Duration{
			config.RetentionRuns: 7 * day, config.RetentionResults: 7 * day, config.RetentionSubmissions: 7 * day,
			config.RetentionEvents: 7 * day, config.RetentionAudit: 0, config.RetentionDeadLetters: 30 * day}},
		{"default only", "retention: {default: 2m}", map[string]time.Duration{
			config.RetentionRuns: 2 * time.Minute, config.RetentionResults: 2 * time.Minute, config.RetentionSubmissions: 2 * time.Minute,
			config.RetentionEvents: 2 * time.Minute, config.RetentionAudit: 2 * time.Minute, config.RetentionDeadLetters: 2 * time.Minute}},
		{"overrides", "retention: {default: 2m, audit: forever, results: 30d, dead_letters: 1h}", map[string]time.Duration{
			config.RetentionRuns: 2 * time.Minute, config.RetentionResults: 30 * day, config.RetentionSubmissions: 2 * time.Minute,
			config.RetentionEvents: 2 * time.Minute, config.RetentionAudit: 0, config.RetentionDeadLetters: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			for kind, want := range tc.want {
				if got := cfg.RetentionOf(kind); got != want {
					t.Errorf("%s: got %s, want %s", kind, got, want)
				}
			}
		})
	}
}

// TestRetention_invalid: every refusal is a *config.FieldError naming the entry.
func TestRetention_invalid(t *testing.T) {
	for _, tc := range []struct{ name, yaml, field string }{
		{"negative", "retention: {runs: -5m}", "retention.runs"},
		{"negative default", "retention: {default: -1h}", "retention.default"},
		{"below a second", "retention: {events: 10ms}", "retention.events"},
		{"not a duration", "retention: {results: soon}", "retention.results"},
		{"unknown kind", "retention: {calls: 1h}", "retention.calls"},
		{"forever for working data", "retention: {runs: forever}", "retention.runs"},
		{"forever as the default", "retention: {default: forever}", "retention.default"},
		{"not a map", "retention: 2m", "retention"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			var fe *config.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("got %v, want a *config.FieldError wrapping ErrInvalid", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
		})
	}
}
