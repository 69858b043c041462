package contracts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
)

// This file is the one place that says which format version of each stored record and
// each message this version reads and writes (docs/operations.md, "Upgrades and
// compatibility"). Services of two adjacent versions run side by side during a rolling
// upgrade, so every format follows "expand, then contract":
//
//   - A version reads its own formats and the previous version's (Oldest..Current).
//   - While the previous version may still run (the default), it writes only what the
//     previous version reads (Compat). Once every service runs it, the operator turns new
//     formats on ([SetNewFormats]; the configuration's `formats: current`) and it writes
//     Current.
//
// A stored record says its version in its JSON object's first field, "format"
// ([FormatField]): [EncodeRecord] stamps it and [DecodeRecord] checks it; a record without
// one is version 1, the format of every record before the field existed. A message says
// its version in its CloudEvent type's ".vN" suffix: [CheckMessageFormat] (the bus's
// publish path) refuses to send a type the previous version does not read while new
// formats are off, and [ExpectType]-style checks on receipt tell a newer version of a
// type from a foreign type.
//
// Registering a new record type or message type, or a new version of one, is one entry
// in [recordFormats] or [messageFormats]; a test (format_test.go) fails for a Type…
// constant or a stored record type that has none.

// FormatField is the field of a stored record's JSON object that names its format version.
const FormatField = "format"

// RecordFormat is what this version knows of one stored record type.
type RecordFormat struct {
	// Name names the record in errors and documents ("run", "call", …).
	Name string
	// Type is the Go type the record decodes into.
	Type reflect.Type
	// Oldest is the oldest version this version reads (the previous version's Compat).
	Oldest int
	// Compat is the version written while new formats are off: one the previous version
	// reads.
	Compat int
	// Current is the newest version, written once new formats are on.
	Current int
	// Upgrade, when set, rewrites the JSON of an older version this version reads
	// (Oldest ≤ from < Current) into the current one before it is decoded: the reader of
	// the previous format, for a change the Go type alone cannot absorb (a field renamed
	// or of another JSON type). Nil: every readable version decodes as the current one.
	Upgrade func(from int, data []byte) ([]byte, error)
	// StampFrom is the first version that carries the "format" field. A reader of an
	// earlier version that decodes strictly (unknown fields refused) cannot read the field
	// itself, so for such a record the stamp is a new format like any other: version 1 is
	// written without it.
	StampFrom int
}

// MessageFormat is what this version knows of one message type.
type MessageFormat struct {
	// Type is the full CloudEvent type, its version the ".vN" suffix.
	Type string
	// Payload is the Go type of the event's data (nil: no data, or not decoded by type).
	Payload reflect.Type
	// New marks a type the previous version does not read: it is published only once new
	// formats are on, and a writer must fall back to what the previous version reads
	// until then ([MayWrite]).
	New bool
}

// recordFormats are the stored records. Version 1 is the format of every record of the
// versions before the field existed (up to 856fa62); the ledger entry and the tool pause
// are read strictly by those versions, so their stamp waits for new formats (version 2 is
// version 1 with the stamp).
var recordFormats = []RecordFormat{
	{Name: "run", Type: reflect.TypeFor[RunRecord](), Oldest: 1, Compat: 1, Current: 1, StampFrom: 1},
	{Name: "batch", Type: reflect.TypeFor[BatchRecord](), Oldest: 1, Compat: 1, Current: 1, StampFrom: 1},
	{Name: "call", Type: reflect.TypeFor[CallRecord](), Oldest: 1, Compat: 1, Current: 1, StampFrom: 1},
	{Name: "ticket", Type: reflect.TypeFor[ResumeTicket](), Oldest: 1, Compat: 1, Current: 1, StampFrom: 1},
	{Name: "limit_ledger", Type: reflect.TypeFor[LimitLedgerEntry](), Oldest: 1, Compat: 1, Current: 2, StampFrom: 2},
	{Name: "tool_pause", Type: reflect.TypeFor[ToolPause](), Oldest: 1, Compat: 1, Current: 2, StampFrom: 2},
}

// messageFormats are the message types, public and internal, and the record revisions
// announced with a type (their data is the record).
var messageFormats = []MessageFormat{
	{Type: TypeBatchRequested, Payload: reflect.TypeFor[BatchSubmission]()},
	{Type: TypeBatchRejected, Payload: reflect.TypeFor[BatchRejected]()},
	// New to this version, but sent on a subject of its own (awaken.unchanged.{run_id})
	// that no previous version publishes or reads: nothing of N-1 meets it, so it needs
	// no switch.
	{Type: TypeBatchUnchanged, Payload: reflect.TypeFor[BatchUnchanged]()},
	{Type: TypeBatchFinalized, Payload: reflect.TypeFor[BatchFinalized]()},
	{Type: TypeToolResult, Payload: reflect.TypeFor[ToolResultEvent]()},
	{Type: TypeBatchResults, Payload: reflect.TypeFor[BatchResults]()},
	{Type: TypeTicketOpened, Payload: reflect.TypeFor[ResumeTicket]()},
	{Type: TypeTicketResume, Payload: reflect.TypeFor[ResumeCommand]()},
	{Type: TypeTicketResolved, Payload: reflect.TypeFor[TicketResolution]()},
	{Type: TypeTicketRejected, Payload: reflect.TypeFor[TicketResolution]()},
	{Type: TypeAgentEvent, Payload: reflect.TypeFor[AgentEvent]()},
	{Type: TypeAudit, Payload: reflect.TypeFor[AuditRecord]()},
	{Type: TypeToolProgress, Payload: reflect.TypeFor[ToolProgress]()},
	{Type: TypeRunEnded, Payload: reflect.TypeFor[RunEndedEvent]()},
	{Type: TypeToolPauseAudit, Payload: reflect.TypeFor[ToolPauseAudit]()},
	{Type: TypeReconcileAudit, Payload: reflect.TypeFor[ReconcileAudit]()},
	// The checkpoint's payload type lives in pkg/auditchain, which imports this package.
	{Type: TypeAuditCheckpoint},
	{Type: TypeMCPCallAudit, Payload: reflect.TypeFor[MCPCallAudit]()},
	{Type: TypeBatchRecorded, Payload: reflect.TypeFor[RunRecord]()},
	{Type: TypeExecRequest, Payload: reflect.TypeFor[CallRecord]()},
	{Type: TypeCallOutput, Payload: reflect.TypeFor[CallRecord]()},
	{Type: TypeTicketExpire, Payload: reflect.TypeFor[TicketTimer]()},
	{Type: TypeRunCancel, Payload: reflect.TypeFor[RunCancel]()},
	{Type: TypeCallCancel, Payload: reflect.TypeFor[CallCancel]()},
	{Type: TypeCallResolve, Payload: reflect.TypeFor[CallResolve]()},
	{Type: TypeResultCorrected, Payload: reflect.TypeFor[ResultCorrected]()},
}

var (
	recordFormatByType  = map[reflect.Type]*RecordFormat{}
	messageFormatByType = map[string]*MessageFormat{}
	newFormats          atomic.Bool
)

func init() {
	for i := range recordFormats {
		recordFormatByType[recordFormats[i].Type] = &recordFormats[i]
	}
	for i := range messageFormats {
		messageFormatByType[messageFormats[i].Type] = &messageFormats[i]
	}
}

// SetNewFormats turns writing this version's new formats on or off for the process (off
// by default: a service writes what the previous version reads). Turn it on only once no
// service of the previous version runs: the configuration's `formats: current`.
func SetNewFormats(on bool) { newFormats.Store(on) }

// NewFormats reports whether this process writes its new formats.
func NewFormats() bool { return newFormats.Load() }

// RecordFormats returns every stored record's format, for documents and tests.
func RecordFormats() []RecordFormat { return append([]RecordFormat(nil), recordFormats...) }

// MessageFormats returns every message type's format, for documents and tests.
func MessageFormats() []MessageFormat { return append([]MessageFormat(nil), messageFormats...) }

// RecordFormatOf returns the format of stored records of type t.
func RecordFormatOf(t reflect.Type) (RecordFormat, bool) {
	f, ok := recordFormatByType[t]
	if !ok {
		return RecordFormat{}, false
	}
	return *f, true
}

// MessageFormatOf returns the format of messages of type typ.
func MessageFormatOf(typ string) (MessageFormat, bool) {
	f, ok := messageFormatByType[typ]
	if !ok {
		return MessageFormat{}, false
	}
	return *f, true
}

// writeVersion is the version of f this process writes.
func (f *RecordFormat) writeVersion() int {
	if newFormats.Load() {
		return f.Current
	}
	return f.Compat
}

// ErrUnknownRecordType is wrapped by [EncodeRecord] for a type with no registered format.
var ErrUnknownRecordType = fmt.Errorf("contracts: record type has no registered format")

// EncodeRecord renders a stored record as JSON with its format version as the first
// field ("format":N), the version this process writes ([SetNewFormats]). Every writer of
// a stored record goes through it (state.Store does), so no record is written without
// its version.
func EncodeRecord(v any) ([]byte, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	f, ok := recordFormatByType[t]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrUnknownRecordType, t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	ver := f.writeVersion()
	if ver < f.StampFrom || len(b) < 2 || b[0] != '{' {
		return b, nil
	}
	out := make([]byte, 0, len(b)+len(FormatField)+16)
	out = append(out, `{"`+FormatField+`":`...)
	out = strconv.AppendInt(out, int64(ver), 10)
	if b[1] != '}' {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// formatPrefix is how every record EncodeRecord stamps begins.
const formatPrefix = `{"` + FormatField + `":`

// RecordVersion returns the format version a stored record's JSON says (1 when it has no
// "format" field) and the JSON without the field when it was the first one (as
// EncodeRecord writes it), for a strict decoder that refuses unknown fields.
func RecordVersion(data []byte) (int, []byte, error) {
	data = bytes.TrimLeft(data, " \t\r\n")
	if !bytes.HasPrefix(data, []byte(formatPrefix)) {
		if !bytes.Contains(data, []byte(`"`+FormatField+`"`)) {
			return 1, data, nil
		}
		// Written by hand or another encoder: the field is somewhere else.
		var probe struct {
			Format *json.RawMessage `json:"format"`
		}
		if err := json.Unmarshal(data, &probe); err != nil || probe.Format == nil {
			return 1, data, nil
		}
		v, err := strconv.Atoi(string(*probe.Format))
		if err != nil || v < 1 {
			return 0, nil, Reject(RejectInvalidField, "record format %s is not a version", *probe.Format)
		}
		return v, data, nil
	}
	rest := data[len(formatPrefix):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	v, err := strconv.Atoi(string(rest[:n]))
	if err != nil || v < 1 || n == len(rest) {
		return 0, nil, Reject(RejectInvalidField, "record format %q is not a version", rest[:min(n+1, len(rest))])
	}
	body := rest[n:]
	switch body[0] {
	case ',':
		body = append([]byte{'{'}, body[1:]...)
	case '}':
		body = []byte("{}")
	default:
		return 0, nil, Reject(RejectInvalidJSON, "record format field is not followed by , or }")
	}
	return v, body, nil
}

// DecodeRecord decodes a stored record into v (a pointer to a registered record type),
// after checking that this version reads its format version: an older one than Oldest
// or a newer one than Current is a [*Rejection] (unsupported_format) — a record of a
// version this one was not built to read is a deployment error to surface, not to guess
// at. Unknown fields are ignored, as JSON decoding does.
func DecodeRecord(data []byte, v any) error {
	body, err := checkRecord(data, v)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// DecodeRecordStrict is [DecodeRecord] refusing unknown fields (other than the format
// field) and trailing data.
func DecodeRecordStrict(data []byte, v any) error {
	body, err := checkRecord(data, v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the record")
	}
	return nil
}

func checkRecord(data []byte, v any) ([]byte, error) {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("contracts: decode record into %v, not a pointer", t)
	}
	ver, body, err := RecordVersion(data)
	if err != nil {
		return nil, err
	}
	f, ok := recordFormatByType[t.Elem()]
	if !ok {
		return nil, fmt.Errorf("%w: %v", ErrUnknownRecordType, t.Elem())
	}
	if ver < f.Oldest || ver > f.Current {
		return nil, Reject(RejectUnsupportedFormat, "%s record of format %d: this version reads formats %d to %d", f.Name, ver, f.Oldest, f.Current)
	}
	if ver < f.Current && f.Upgrade != nil {
		if body, err = f.Upgrade(ver, body); err != nil {
			return nil, Reject(RejectInvalidField, "%s record of format %d: %v", f.Name, ver, err)
		}
	}
	return body, nil
}

// MessageVersion splits a CloudEvent type into its name and its ".vN" version (0 when
// it has none).
func MessageVersion(typ string) (name string, version int) {
	i := strings.LastIndex(typ, ".v")
	if i < 0 {
		return typ, 0
	}
	v, err := strconv.Atoi(typ[i+2:])
	if err != nil || v < 1 {
		return typ, 0
	}
	return typ[:i], v
}

// MayWrite reports whether this process may publish messages of type typ: a type the
// previous version does not read ([MessageFormat.New]) waits until new formats are on.
// A writer of a new type asks it and falls back to what the previous version reads.
func MayWrite(typ string) bool {
	f, ok := messageFormatByType[typ]
	return !ok || !f.New || newFormats.Load()
}

// CheckMessageFormat is the publish path's check of [MayWrite], as an error that names
// why. A type with no registered format passes (a test's own type); format_test.go fails
// for a Type… constant of this package that is not registered.
func CheckMessageFormat(typ string) error {
	if !MayWrite(typ) {
		return fmt.Errorf("contracts: message type %q is new in this version and is not written until new formats are on (formats: current)", typ)
	}
	return nil
}

// OtherVersion returns, for a type no accepted type equals, the accepted type of the
// same name with another version, if any: the event is of a format this reader does not
// read, not of a foreign type.
func OtherVersion(typ string, accepted ...string) (string, bool) {
	name, v := MessageVersion(typ)
	if v == 0 {
		return "", false
	}
	for _, a := range accepted {
		if an, av := MessageVersion(a); an == name && av != v {
			return a, true
		}
	}
	return "", false
}
