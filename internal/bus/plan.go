package bus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Change is one difference between a stream or bucket as the server holds it and as the
// configuration wants it: a store to create (Field empty), or one setting to change.
type Change struct {
	// Kind is "stream", "bucket" or "object store"; Name is the name an operator uses
	// (a bucket's, not its stream's).
	Kind, Name string
	// Field is the setting, named as in the JetStream stream configuration; empty for a
	// creation.
	Field string
	// Old and New are the values, as text.
	Old, New string
}

// String renders c as one line of a plan: "stream AWAKEN_AUDIT: max_age none → 48h0m0s".
func (c Change) String() string {
	if c.Field == "" {
		return fmt.Sprintf("%s %s: create", c.Kind, c.Name)
	}
	return fmt.Sprintf("%s %s: %s %s → %s", c.Kind, c.Name, c.Field, c.Old, c.New)
}

// setting is one stream setting awaken manages, read from and written to a stream
// configuration. Every other setting of an existing stream (an operator's MaxBytes, say)
// is left as the server holds it.
type setting struct {
	name string
	get  func(*jetstream.StreamConfig) any
	set  func(dst, src *jetstream.StreamConfig)
}

var (
	setSubjects = setting{"subjects", func(c *jetstream.StreamConfig) any { return c.Subjects },
		func(d, s *jetstream.StreamConfig) { d.Subjects = s.Subjects }}
	setMaxAge = setting{"max_age", func(c *jetstream.StreamConfig) any { return c.MaxAge },
		func(d, s *jetstream.StreamConfig) { d.MaxAge = s.MaxAge }}
	setDuplicates = setting{"duplicate_window", func(c *jetstream.StreamConfig) any { return c.Duplicates },
		func(d, s *jetstream.StreamConfig) { d.Duplicates = s.Duplicates }}
	setHistory = setting{"max_msgs_per_subject", func(c *jetstream.StreamConfig) any { return max(c.MaxMsgsPerSubject, -1) },
		func(d, s *jetstream.StreamConfig) { d.MaxMsgsPerSubject = s.MaxMsgsPerSubject }}
	setMsgTTL = setting{"allow_msg_ttl", func(c *jetstream.StreamConfig) any { return c.AllowMsgTTL },
		func(d, s *jetstream.StreamConfig) { d.AllowMsgTTL = s.AllowMsgTTL }}
	setMarkerTTL = setting{"subject_delete_marker_ttl", func(c *jetstream.StreamConfig) any { return c.SubjectDeleteMarkerTTL },
		func(d, s *jetstream.StreamConfig) { d.SubjectDeleteMarkerTTL = s.SubjectDeleteMarkerTTL }}
	setSchedules = setting{"allow_msg_schedules", func(c *jetstream.StreamConfig) any { return c.AllowMsgSchedules },
		func(d, s *jetstream.StreamConfig) { d.AllowMsgSchedules = s.AllowMsgSchedules }}
	setAtomic = setting{"allow_atomic_publish", func(c *jetstream.StreamConfig) any { return c.AllowAtomicPublish },
		func(d, s *jetstream.StreamConfig) { d.AllowAtomicPublish = s.AllowAtomicPublish }}
	setRePublish = setting{"republish", func(c *jetstream.StreamConfig) any { return c.RePublish },
		func(d, s *jetstream.StreamConfig) { d.RePublish = s.RePublish }}
	setReplicas = setting{"replicas", func(c *jetstream.StreamConfig) any { return max(c.Replicas, 1) },
		func(d, s *jetstream.StreamConfig) { d.Replicas = s.Replicas }}
	setStorage = setting{"storage", func(c *jetstream.StreamConfig) any { return c.Storage },
		func(d, s *jetstream.StreamConfig) { d.Storage = s.Storage }}
	setDescription = setting{"description", func(c *jetstream.StreamConfig) any { return c.Description },
		func(d, s *jetstream.StreamConfig) { d.Description = s.Description }}
)

// What awaken manages of each kind of store.
var (
	streamSettings = []setting{setSubjects, setMaxAge, setDuplicates, setMsgTTL, setSchedules, setAtomic,
		setRePublish, setReplicas, setStorage, setDescription}
	bucketSettings = []setting{setHistory, setMaxAge, setMsgTTL, setMarkerTTL, setReplicas, setStorage, setDescription}
	objectSettings = []setting{setMaxAge, setReplicas, setStorage, setDescription}
)

// store is one stream, bucket or object store of the topology: the stream that holds it,
// the settings awaken manages with their wanted values, and how to create it.
type store struct {
	kind, name string
	want       jetstream.StreamConfig
	settings   []setting
	create     func(context.Context, jetstream.JetStream) error
}

func topologyStores(names contracts.Names, cfg TopologyConfig) []store {
	var stores []store
	for _, sc := range StreamConfigs(names, cfg) {
		stores = append(stores, store{"stream", sc.Name, sc, streamSettings,
			func(ctx context.Context, js jetstream.JetStream) error { return ensureStream(ctx, js, sc) }})
	}
	for _, kc := range BucketConfigs(names, cfg) {
		want := jetstream.StreamConfig{Name: "KV_" + kc.Bucket, Description: kc.Description,
			MaxMsgsPerSubject: int64(max(kc.History, 1)), MaxAge: kc.TTL, Replicas: kc.Replicas, Storage: kc.Storage,
			AllowMsgTTL: kc.LimitMarkerTTL > 0, SubjectDeleteMarkerTTL: kc.LimitMarkerTTL}
		stores = append(stores, store{"bucket", kc.Bucket, want, bucketSettings,
			func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateOrUpdateKeyValue(ctx, kc)
				return err
			}})
	}
	oc := ObjectStoreConfig(names, cfg)
	want := jetstream.StreamConfig{Name: "OBJ_" + oc.Bucket, Description: oc.Description, MaxAge: oc.TTL,
		Replicas: oc.Replicas, Storage: oc.Storage}
	stores = append(stores, store{"object store", oc.Bucket, want, objectSettings,
		func(ctx context.Context, js jetstream.JetStream) error {
			_, err := js.CreateOrUpdateObjectStore(ctx, oc)
			return err
		}})
	return stores
}

// current returns the configuration the server holds for s, or nil when s does not exist.
func (s *store) current(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamConfig, error) {
	st, err := js.Stream(ctx, s.want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bus: read %s %s: %w", s.kind, s.name, err)
	}
	cfg := st.CachedInfo().Config
	return &cfg, nil
}

// diff lists the settings of cur that differ from what s wants.
func (s *store) diff(cur *jetstream.StreamConfig) []Change {
	if cur == nil {
		return []Change{{Kind: s.kind, Name: s.name}}
	}
	var changes []Change
	for _, f := range s.settings {
		old, want := f.get(cur), f.get(&s.want)
		if !reflect.DeepEqual(old, want) {
			changes = append(changes, Change{Kind: s.kind, Name: s.name, Field: f.name, Old: formatSetting(f, old), New: formatSetting(f, want)})
		}
	}
	return changes
}

func formatSetting(f setting, v any) string {
	switch v := v.(type) {
	case time.Duration:
		if v == 0 {
			return "none"
		}
		return v.String()
	case []string:
		return strings.Join(v, ",")
	case *jetstream.RePublish:
		if v == nil {
			return "none"
		}
		return v.Source + " → " + v.Destination
	case int64:
		if f.name == setHistory.name && v < 0 {
			return "unlimited"
		}
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}

// PlanTopology lists what [ApplyTopology] would change, changing nothing: each store to
// create, each setting to change (`awaken setup --dry-run`).
func PlanTopology(ctx context.Context, js jetstream.JetStream, names contracts.Names, cfg TopologyConfig) ([]Change, error) {
	var plan []Change
	for _, s := range topologyStores(names, cfg) {
		cur, err := s.current(ctx, js)
		if err != nil {
			return nil, err
		}
		plan = append(plan, s.diff(cur)...)
	}
	return plan, nil
}

// ApplyTopology creates every stream and bucket of names that does not exist, and changes
// the settings awaken manages (subjects, ages, history, TTLs, replicas, storage …) of
// those that differ from cfg, logging each change it makes (store, field, old → new) and
// returning them: a value an operator set by hand is replaced only with a line that says
// so, and a setting awaken does not manage (a MaxBytes, say) is kept. A store that already
// matches is not written at all.
//
// It is idempotent and safe to run concurrently from every service at start-up: creating a
// stream that another process created a moment earlier with the same configuration
// succeeds. A change the server cannot apply in place (for example the storage type) is
// returned as an error rather than silently ignored.
func ApplyTopology(ctx context.Context, js jetstream.JetStream, names contracts.Names, cfg TopologyConfig, log zerolog.Logger) ([]Change, error) {
	var applied []Change
	for _, s := range topologyStores(names, cfg) {
		cur, err := s.current(ctx, js)
		if err != nil {
			return applied, err
		}
		changes := s.diff(cur)
		if len(changes) == 0 {
			continue
		}
		if cur == nil {
			err = s.create(ctx, js)
		} else {
			upd := *cur
			for _, f := range s.settings {
				f.set(&upd, &s.want)
			}
			if s.kind == "stream" {
				err = ensureStream(ctx, js, upd)
			} else {
				_, err = js.UpdateStream(ctx, upd)
			}
		}
		if err != nil {
			if errors.Is(err, ErrSchedulesStillAllowed) {
				return applied, err
			}
			return applied, fmt.Errorf("bus: ensure %s %s: %w", s.kind, s.name, err)
		}
		for _, c := range changes {
			ev := log.Info().Str(s.logField(), c.Name)
			if c.Field == "" {
				ev.Msg("created " + s.kind)
				continue
			}
			ev.Str("field", c.Field).Str("old", c.Old).Str("new", c.New).
				Msgf("changed %s %s: %s %s → %s (from the configuration)", s.kind, c.Name, c.Field, c.Old, c.New)
		}
		applied = append(applied, changes...)
	}
	return applied, nil
}

// logField is the log field naming the store.
func (s *store) logField() string {
	if s.kind == "stream" {
		return "stream"
	}
	return "bucket"
}
