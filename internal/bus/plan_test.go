package bus_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestApplyTopologyLogsEachChangeAndKeepsWhatTheConfigurationSays: a max age an operator
// set by hand through the JetStream API is kept, with no line and no write, when the
// configuration says the same; when it says otherwise the start changes it and logs the
// store, the field, the old and the new value. A setting awaken does not manage (MaxBytes)
// is kept either way.
func TestApplyTopologyLogsEachChangeAndKeepsWhatTheConfigurationSays(t *testing.T) {
	h := newHarness(t)
	audit, claims := h.names.AuditStream(), h.names.ClaimsStream()
	// The claims stream follows the audit retention too: the operator set both by hand.
	for _, name := range []string{audit, claims} {
		st, err := h.js.Stream(h.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		byHand := st.CachedInfo().Config
		byHand.MaxAge, byHand.MaxBytes = 48*time.Hour, 1<<30
		if _, err := h.js.UpdateStream(h.ctx, byHand); err != nil {
			t.Fatal(err)
		}
	}

	changes, err := bus.ApplyTopology(h.ctx, h.js, h.names, bus.TopologyConfig{AuditMaxAge: 48 * time.Hour}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 || h.logs.String() != "" {
		t.Fatalf("configuration equal to the operator's value: changes %v, log %q; want none", changes, h.logs.String())
	}
	h.wantAudit(48*time.Hour, 1<<30)

	changes, err = bus.ApplyTopology(h.ctx, h.js, h.names, bus.TopologyConfig{AuditMaxAge: 24 * time.Hour}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	want := []bus.Change{
		{Kind: "stream", Name: audit, Field: "max_age", Old: "48h0m0s", New: "24h0m0s"},
		{Kind: "stream", Name: claims, Field: "max_age", Old: "48h0m0s", New: "24h0m0s"},
	}
	if !slices.Equal(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
	logged := h.logs.String()
	for _, part := range []string{`"stream":"` + audit + `"`, `"field":"max_age"`, `"old":"48h0m0s"`, `"new":"24h0m0s"`} {
		if !strings.Contains(logged, part) {
			t.Errorf("log %q does not say %s", logged, part)
		}
	}
	h.wantAudit(24*time.Hour, 1<<30)
}

func (h *harness) wantAudit(maxAge time.Duration, maxBytes int64) {
	h.t.Helper()
	st, err := h.js.Stream(h.ctx, h.names.AuditStream())
	if err != nil {
		h.t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxAge != maxAge || c.MaxBytes != maxBytes {
		h.t.Fatalf("audit stream max age %s, max bytes %d; want %s, %d", c.MaxAge, c.MaxBytes, maxAge, maxBytes)
	}
}

// TestPlanTopologyChangesNothing: the dry run lists a missing store as a creation and each
// differing setting, and leaves the server as it was: the store still missing, the
// setting unchanged.
func TestPlanTopologyChangesNothing(t *testing.T) {
	h := newHarness(t)
	if err := h.js.DeleteKeyValue(h.ctx, h.names.LimitsBucket()); err != nil {
		t.Fatal(err)
	}
	topo := bus.TopologyConfig{EventsMaxAge: 2 * time.Minute, RunsMaxAge: 2 * time.Minute}
	plan, err := bus.PlanTopology(h.ctx, h.js, h.names, topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []bus.Change{
		{Kind: "stream", Name: h.names.EventsStream(), Field: "max_age", Old: "168h0m0s", New: "2m0s"},
		{Kind: "bucket", Name: h.names.LimitsBucket()},
		{Kind: "bucket", Name: h.names.BatchesBucket(), Field: "subject_delete_marker_ttl", Old: "168h0m0s", New: "2m0s"},
		{Kind: "bucket", Name: h.names.RunsBucket(), Field: "subject_delete_marker_ttl", Old: "84h0m0s", New: "1m0s"},
	} {
		if !slices.Contains(plan, want) {
			t.Errorf("plan %v lacks %v", plan, want)
		}
	}
	if _, err := h.js.KeyValue(h.ctx, h.names.LimitsBucket()); err == nil {
		t.Error("the dry run created the limits bucket")
	}
	st, err := h.js.Stream(h.ctx, h.names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxAge; got != bus.DefaultEventsMaxAge {
		t.Errorf("events max age %s after the dry run, want %s", got, bus.DefaultEventsMaxAge)
	}

	// Applied, the plan is what changes; a second plan is empty.
	applied, err := bus.ApplyTopology(h.ctx, h.js, h.names, topo, h.log)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, plan) {
		t.Errorf("applied %v, planned %v", applied, plan)
	}
	if again, err := bus.PlanTopology(h.ctx, h.js, h.names, topo); err != nil || len(again) != 0 {
		t.Errorf("plan after applying: %v (%v), want empty", again, err)
	}
}

// TestTopologyBucketsOfExpiringRecordsKeepOneRevision: the buckets whose records expire
// by a per-message TTL keep one revision per key and allow TTLs; a TTL on a revision with
// older ones behind it would bring the key back as its previous value. The markers of
// expired records drive the gate's sweeps, and a gate down for less than their TTL still
// sees them: the runs bucket keeps them half the run retention, the archive a whole one
// (the run record may hold a finished batch that long, and the archive's marker keeps its
// claim from archiving an expired batch again).
func TestTopologyBucketsOfExpiringRecordsKeepOneRevision(t *testing.T) {
	names := contracts.NewNames("")
	want := map[string]time.Duration{names.RunsBucket(): 5 * time.Minute, names.BatchesBucket(): 10 * time.Minute}
	for _, kc := range bus.BucketConfigs(names, bus.TopologyConfig{RunsMaxAge: 10 * time.Minute}) {
		marker, ok := want[kc.Bucket]
		if !ok {
			continue
		}
		if kc.History != 1 || kc.LimitMarkerTTL != marker {
			t.Errorf("bucket %s: history %d, limit marker TTL %s; want 1 and %s", kc.Bucket, kc.History, kc.LimitMarkerTTL, marker)
		}
	}
}

// TestApplyTopologyUpgradesTheBucketsOfExpiringRecords: buckets of an earlier version (three
// revisions per key, no per-message TTL) are changed in place to one revision and TTLs
// allowed, each change logged, and keep their records.
func TestApplyTopologyUpgradesTheBucketsOfExpiringRecords(t *testing.T) {
	h := newHarness(t)
	older := contracts.NewNames("older")
	kv, err := h.js.CreateKeyValue(h.ctx, jetstream.KeyValueConfig{Bucket: older.RunsBucket(), History: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if _, err := kv.Put(h.ctx, "run-1", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := bus.ApplyTopology(h.ctx, h.js, older, bus.TopologyConfig{}, h.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []bus.Change{
		{Kind: "bucket", Name: older.RunsBucket(), Field: "max_msgs_per_subject", Old: "3", New: "1"},
		{Kind: "bucket", Name: older.RunsBucket(), Field: "allow_msg_ttl", Old: "false", New: "true"},
		{Kind: "bucket", Name: older.RunsBucket(), Field: "subject_delete_marker_ttl", Old: "none", New: "84h0m0s"},
	} {
		if !slices.Contains(changes, want) {
			t.Errorf("changes %v lack %v", changes, want)
		}
		if !strings.Contains(h.logs.String(), `"field":"`+want.Field+`"`) {
			t.Errorf("no log line for %s", want.Field)
		}
	}
	status, err := kv.Status(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status.History() != 1 || status.LimitMarkerTTL() != bus.DefaultRunsMaxAge/2 {
		t.Errorf("runs bucket after the upgrade: history %d, marker TTL %s", status.History(), status.LimitMarkerTTL())
	}
	if e, err := kv.Get(h.ctx, "run-1"); err != nil || string(e.Value()) != "c" {
		t.Errorf("record after the upgrade: %v (%v), want c", e, err)
	}
}
