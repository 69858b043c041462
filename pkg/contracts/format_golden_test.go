package contracts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// previousFormats is the folder of the previous version's records and messages, captured
// once from that version and never rewritten (docs/operations.md, "Upgrades and
// compatibility"):
//
//   - {STREAM}.json: one stored message of each kind (CloudEvent type and set of
//     top-level fields) of every stream and bucket, captured from that version's services
//     under the rolling-upgrade test's load (AWAKEN_UPGRADE_GOLDEN=dir go test -run
//     TestRollingUpgrade ./chaos/, at its previous version);
//   - golden/: that version's wire and kernel goldens (testdata/golden at the commit);
//   - filled/: every record and message payload type of that version with each field
//     it could fill set (named after the record or the CloudEvent type), rendered by
//     testdata/formats/capture-formats.go run in that version's tree.
//
// When the previous version moves on (a release), capture its formats into a folder of
// its own and point previousFormats there.
const previousFormats = "testdata/formats/856fa62"

// TestPreviousFormatsDecode decodes every record and message the previous version wrote
// with this version's readers: a record by its format version (DecodeRecordStrict), a
// message by its type's registered payload, both refusing unknown fields. It fails when
// a format changes without a reader for the old one — a field renamed, removed or of
// another JSON type, a record version no longer read, a message type no longer
// registered.
func TestPreviousFormatsDecode(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(previousFormats, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured formats in %s (%v)", previousFormats, err)
	}
	for _, file := range files {
		stream := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(stream, func(t *testing.T) {
			var samples []struct {
				Subject string              `json:"subject"`
				Header  map[string][]string `json:"header"`
				Data    json.RawMessage     `json:"data"`
			}
			readJSON(t, file, &samples)
			for _, s := range samples {
				typ := ""
				if v := s.Header["ce-type"]; len(v) > 0 {
					typ = v[0]
				}
				if typ != "" {
					if _, ok := MessageFormatOf(typ); !ok {
						t.Errorf("%s: type %s has no registered format: this version has no reader for it", s.Subject, typ)
					}
				}
				bucket, isRecord := strings.CutPrefix(stream, "KV_")
				switch {
				case isRecord:
					decodeStoredRecord(t, bucket, s.Subject, s.Data)
				default:
					f, _ := MessageFormatOf(typ)
					if f.Payload != nil {
						strictInto(t, s.Subject+" ("+typ+")", f.Payload, s.Data)
					}
				}
			}
		})
	}
}

// recordOfBucket names the record type each bucket of the previous version holds (nil:
// not a record this package reads — a tool's own counter).
var recordOfBucket = map[string]reflect.Type{
	"AWAKEN_runs":        reflect.TypeFor[RunRecord](),
	"AWAKEN_batches":     reflect.TypeFor[BatchRecord](),
	"AWAKEN_calls":       reflect.TypeFor[CallRecord](),
	"AWAKEN_tickets":     reflect.TypeFor[ResumeTicket](),
	"AWAKEN_limits":      reflect.TypeFor[LimitLedgerEntry](),
	"AWAKEN_tool_pauses": reflect.TypeFor[ToolPause](),
	"AWAKEN_tools":       reflect.TypeFor[[]ToolDescriptor](),
	"AWAKEN_counters":    nil,
}

func decodeStoredRecord(t *testing.T, bucket, subject string, data []byte) {
	t.Helper()
	rt, known := recordOfBucket[bucket]
	switch {
	case !known:
		t.Errorf("%s: bucket %s holds no record type this version knows", subject, bucket)
		return
	case rt == nil:
		return
	}
	if _, ok := RecordFormatOf(rt); !ok {
		// The tool catalog is a JSON array, rewritten by brain-exec at every start: no
		// record of it outlives the version that wrote it.
		strictInto(t, subject, rt, data)
		return
	}
	v := reflect.New(rt)
	if err := DecodeRecordStrict(data, v.Interface()); err != nil {
		t.Errorf("%s: %v record of the previous version does not decode: %v", subject, rt, err)
	}
}

// TestPreviousGoldensDecode decodes the previous version's wire and kernel goldens, and
// its filled payloads, strictly into this version's types.
func TestPreviousGoldensDecode(t *testing.T) {
	cases := map[string]reflect.Type{}
	for _, c := range wireCases(t) {
		cases["wire_"+c.name] = reflect.TypeOf(c.fresh()).Elem()
	}
	for name, v := range goldenKernelFixtures(t) {
		cases[name] = reflect.TypeOf(v)
		if cases[name].Kind() == reflect.Pointer {
			cases[name] = cases[name].Elem()
		}
	}
	goldens, _ := filepath.Glob(filepath.Join(previousFormats, "golden", "*.json"))
	if len(goldens) == 0 {
		t.Fatalf("no previous goldens in %s/golden", previousFormats)
	}
	for _, path := range goldens {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		rt, ok := cases[name]
		if !ok {
			t.Errorf("%s: no golden case of this version reads it (a format dropped without a reader?)", path)
			continue
		}
		decodeFile(t, path, rt)
	}
	filled, _ := filepath.Glob(filepath.Join(previousFormats, "filled", "*.json"))
	if len(filled) == 0 {
		t.Fatalf("no filled payloads in %s/filled", previousFormats)
	}
	for _, path := range filled {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		if rec, ok := strings.CutPrefix(name, "record_"); ok {
			var rt reflect.Type
			for _, f := range RecordFormats() {
				if f.Name == rec {
					rt = f.Type
				}
			}
			if rt == nil {
				t.Errorf("%s: no record format named %s", path, rec)
				continue
			}
			decodeFile(t, path, rt)
			continue
		}
		f, ok := MessageFormatOf(name)
		if !ok {
			t.Errorf("%s: type %s has no registered format", path, name)
			continue
		}
		if f.Payload != nil {
			decodeFile(t, path, f.Payload)
		}
	}
}

func decodeFile(t *testing.T, path string, rt reflect.Type) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := RecordFormatOf(rt); ok {
		if err := DecodeRecordStrict(data, reflect.New(rt).Interface()); err != nil {
			t.Errorf("%s: %v does not decode: %v", path, rt, err)
		}
		return
	}
	strictInto(t, path, rt, data)
}

func strictInto(t *testing.T, what string, rt reflect.Type, data []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(rt).Interface()); err != nil {
		t.Errorf("%s: the previous version's %v does not decode: %v", what, rt, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
