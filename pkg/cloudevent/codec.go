package cloudevent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// SpecVersion is the only CloudEvents specification version this codec speaks.
const SpecVersion = "1.0"

// Content types of the two content modes.
const (
	// ContentTypeJSON is the data content type of every awaken event.
	ContentTypeJSON = "application/json"
	// ContentTypeStructured marks a structured-mode message: the whole event is the JSON body.
	ContentTypeStructured = "application/cloudevents+json"
)

// Header names written in binary mode. Receivers match them case-insensitively (NATS ADR-4
// leaves case to the application and the CloudEvents NATS binding treats names as
// case-insensitive), but this codec always writes them in lower case, as sdk-go does.
const (
	HeaderID          = "ce-id"
	HeaderSource      = "ce-source"
	HeaderType        = "ce-type"
	HeaderSpecVersion = "ce-specversion"
	HeaderTime        = "ce-time"
	HeaderSubject     = "ce-subject"
	HeaderContentType = "Content-Type"
	headerPrefix      = "ce-"
)

// Event is one CloudEvent 1.0 as the services see it. Data is the raw JSON body, never
// re-encoded, so a payload decoder can apply its own strict rules (unknown fields, depth,
// size) to exactly the bytes that were published.
//
// Extensions hold every other attribute as a string (binary mode carries only strings;
// structured-mode numbers and booleans are kept in their JSON text form). Extension names
// must be lower-case ASCII letters and digits, as the CloudEvents spec requires; use
// [Event.SetExtension] to have that checked.
type Event struct {
	ID              string
	Source          string
	Type            string
	Subject         string
	Time            time.Time
	DataContentType string
	Data            []byte
	Extensions      map[string]string
}

// NewEvent builds an event whose data is payload marshalled as JSON, stamped now (UTC).
// id must be deterministic for the operation and stage that produces the event: it becomes
// the Nats-Msg-Id, so a re-publish after a crash is deduplicated by the stream.
func NewEvent(id, source, typ string, payload any) (Event, error) {
	switch {
	case id == "":
		return Event{}, fmt.Errorf("bus: new event: empty id")
	case source == "":
		return Event{}, fmt.Errorf("bus: new event %s: empty source", id)
	case typ == "":
		return Event{}, fmt.Errorf("bus: new event %s: empty type", id)
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("bus: new event %s: marshal %s payload: %w", id, typ, err)
	}
	return Event{
		ID:              id,
		Source:          source,
		Type:            typ,
		Time:            time.Now().UTC(),
		DataContentType: ContentTypeJSON,
		Data:            data,
	}, nil
}

// SetExtension sets an extension attribute after checking that its name is a valid
// CloudEvents attribute name (lower-case a-z and 0-9, at most 20 characters) that does not
// shadow a core attribute.
func (e *Event) SetExtension(name, value string) error {
	if !validExtensionName(name) {
		return fmt.Errorf("bus: invalid extension attribute name %q", name)
	}
	if e.Extensions == nil {
		e.Extensions = make(map[string]string, 1)
	}
	e.Extensions[name] = value
	return nil
}

func validExtensionName(name string) bool {
	return len(name) <= 20 && !isCoreAttribute(name) && validAttributeName(name)
}

// validAttributeName applies the CloudEvents naming rule: one or more lower-case ASCII
// letters or digits. Decoding does not enforce the recommended 20-character limit.
func validAttributeName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func isCoreAttribute(name string) bool {
	switch name {
	case "id", "source", "type", "specversion", "time", "subject", "datacontenttype", "data", "data_base64":
		return true
	}
	return false
}

// EncodeMsg renders e in binary content mode on subject: attributes in ce-* headers
// (percent-encoded per the NATS binding draft), Content-Type, and Nats-Msg-Id equal to the
// ce-id header so the stream deduplicates re-publishes. The body is e.Data, not copied.
//
// Extensions are written before the core attributes, so an extension that collides with a
// core attribute name can never override it. EncodeMsg never fails; an empty DataContentType
// is written as application/json.
func EncodeMsg(subject string, e Event) *nats.Msg {
	n := 9 + len(e.Extensions)
	// Like nats.NewMsg (the header is never nil, which atomic batch publishing requires),
	// but sized up front so the map does not grow while it is filled.
	m := &nats.Msg{Subject: subject, Header: make(nats.Header, n)}
	// One backing array for every single-value header slice: a handful of allocations
	// fewer per message than Header.Set.
	vals := make([]string, 0, n)
	set := func(k, v string) {
		vals = append(vals, v)
		m.Header[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	for k, v := range e.Extensions {
		set(headerPrefix+k, percentEncode(v))
	}
	id := percentEncode(e.ID)
	set(HeaderID, id)
	set(HeaderSource, percentEncode(e.Source))
	set(HeaderType, percentEncode(e.Type))
	set(HeaderSpecVersion, SpecVersion)
	if !e.Time.IsZero() {
		var buf [40]byte
		set(HeaderTime, string(e.Time.UTC().AppendFormat(buf[:0], time.RFC3339Nano)))
	}
	if e.Subject != "" {
		set(HeaderSubject, percentEncode(e.Subject))
	}
	ct := e.DataContentType
	if ct == "" {
		ct = ContentTypeJSON
	}
	set(HeaderContentType, ct)
	set(jetstream.MsgIDHeader, id)
	m.Data = e.Data
	return m
}

// DecodeMsg reads one CloudEvent from a NATS message.
//
//   - Binary mode when a ce-specversion header is present (any case): attributes from the
//     ce-* headers, percent-decoded; the data content type, if given (Content-Type or
//     ce-datacontenttype), must be application/json with optional parameters.
//   - Structured mode when Content-Type is application/cloudevents+json, or when there is
//     no Content-Type at all (the released NATS binding v1.0.2 carries no headers): the body
//     is the JSON event format, with data as a JSON value or data_base64.
//
// Every failure is a [*contracts.Rejection]: missing_attribute (naming it),
// unsupported_content_type, invalid_json (structured body), invalid_utf8 (a decoded header
// value) or invalid_field (wrong specversion, bad time, conflicting duplicate attributes,
// wrong JSON type of an attribute). DecodeMsg keeps references to data and header strings
// instead of copying them.
func DecodeMsg(h nats.Header, data []byte) (Event, error) {
	var (
		e        Event
		spec     string
		hasSpec  bool
		timeRaw  string
		ct       string
		hasCT    bool
		ceCT     string
		hasCeCT  bool
		firstErr error
	)
	seen := 0 // bit set of core attributes already read, to detect conflicting duplicates
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		if len(k) == len(HeaderContentType) && strings.EqualFold(k, HeaderContentType) {
			if hasCT && ct != v {
				firstErr = orErr(firstErr, contracts.Reject(contracts.RejectInvalidField, "conflicting Content-Type headers"))
			}
			ct, hasCT = v, true
			continue
		}
		if len(k) <= len(headerPrefix) || (k[0]|0x20) != 'c' || (k[1]|0x20) != 'e' || k[2] != '-' {
			continue
		}
		name := lowerASCII(k[len(headerPrefix):])
		if name == "specversion" {
			hasSpec = true // binary mode, even if the value turns out to be unreadable
		}
		dv, err := percentDecode(v)
		if err != nil {
			firstErr = orErr(firstErr, contracts.Reject(contracts.RejectInvalidUTF8, "header %s: %v", k, err))
			continue
		}
		var bit int
		var dst *string
		switch name {
		case "id":
			bit, dst = 1, &e.ID
		case "source":
			bit, dst = 2, &e.Source
		case "type":
			bit, dst = 4, &e.Type
		case "specversion":
			bit, dst = 8, &spec
		case "time":
			bit, dst = 16, &timeRaw
		case "subject":
			bit, dst = 32, &e.Subject
		case "datacontenttype":
			bit, dst, hasCeCT = 64, &ceCT, true
		default:
			if !validAttributeName(name) {
				firstErr = orErr(firstErr, contracts.Reject(contracts.RejectInvalidField, "header %s: attribute names are lower-case letters and digits", k))
				continue
			}
			if prev, ok := e.Extensions[name]; ok && prev != dv {
				firstErr = orErr(firstErr, contracts.Reject(contracts.RejectInvalidField, "conflicting values for attribute %s", name))
				continue
			}
			if e.Extensions == nil {
				e.Extensions = make(map[string]string, 2)
			}
			e.Extensions[name] = dv
			continue
		}
		if seen&bit != 0 && *dst != dv {
			firstErr = orErr(firstErr, contracts.Reject(contracts.RejectInvalidField, "conflicting values for attribute %s", name))
			continue
		}
		seen |= bit
		*dst = dv
	}

	if !hasSpec {
		if (seen != 0 || e.Extensions != nil) && !hasMediaType(ct, ContentTypeStructured) {
			return Event{}, contracts.Reject(contracts.RejectMissingAttribute, "missing required attribute %s", HeaderSpecVersion)
		}
		return decodeStructuredOrReject(ct, hasCT, data)
	}
	if firstErr != nil {
		return Event{}, firstErr
	}
	// Binary mode.
	switch {
	case hasCT:
		e.DataContentType = ct
	case hasCeCT:
		e.DataContentType = ceCT
	}
	if hasCT && hasCeCT && !sameMediaType(ct, ceCT) {
		return Event{}, contracts.Reject(contracts.RejectInvalidField, "Content-Type %q contradicts ce-datacontenttype %q", ct, ceCT)
	}
	if e.DataContentType != "" && !isJSONMediaType(e.DataContentType) {
		return Event{}, contracts.Reject(contracts.RejectUnsupportedContent, "data content type %q is not supported (want %s)", e.DataContentType, ContentTypeJSON)
	}
	if err := finishAttributes(&e, spec, timeRaw, true); err != nil {
		return Event{}, err
	}
	e.Data = data
	return e, nil
}

// missingHeaders is the refusal of a message that carries no CloudEvents attributes at
// all, naming what a binary-mode message needs: a bare payload published without headers
// would otherwise be read as a structured event whose fields are attributes, and refused
// for one of them.
func missingHeaders(what string) error {
	return contracts.Reject(contracts.RejectMissingCloudEventHeaders,
		"%s has no CloudEvents headers: publish it in binary mode with the headers ce-specversion: %s, ce-id, ce-source, ce-type "+
			"and Content-Type: %s (Nats-Msg-Id: the ce-id), or as a structured CloudEvent (Content-Type: %s, the event as the body)",
		what, SpecVersion, ContentTypeJSON, ContentTypeStructured)
}

// decodeStructuredOrReject handles a message without ce-specversion.
func decodeStructuredOrReject(ct string, hasCT bool, data []byte) (Event, error) {
	if !hasCT && !hasSpecVersion(data) && json.Valid(data) {
		return Event{}, missingHeaders("the message (a JSON body without specversion)")
	}
	if !hasCT || hasMediaType(ct, ContentTypeStructured) {
		return decodeStructured(data)
	}
	if isJSONMediaType(ct) {
		return Event{}, missingHeaders("the " + ContentTypeJSON + " message")
	}
	return Event{}, contracts.Reject(contracts.RejectUnsupportedContent, "content type %q is neither a binary-mode CloudEvent nor %s", ct, ContentTypeStructured)
}

// hasSpecVersion reports whether data is a JSON object with a specversion member: what
// tells a structured CloudEvent from a bare payload.
func hasSpecVersion(data []byte) bool {
	var probe struct {
		SpecVersion *json.RawMessage `json:"specversion"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.SpecVersion != nil
}

// decodeStructured parses the JSON event format (CloudEvents JSON format §3).
func decodeStructured(data []byte) (Event, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Event{}, contracts.Reject(contracts.RejectInvalidJSON, "structured CloudEvent body is not a JSON object: %v", err)
	}
	var e Event
	var spec, timeRaw string
	var hasData, hasB64 bool
	var b64 string
	for k, v := range raw {
		var err error
		switch k {
		case "id":
			err = jsonString(k, v, &e.ID)
		case "source":
			err = jsonString(k, v, &e.Source)
		case "type":
			err = jsonString(k, v, &e.Type)
		case "specversion":
			err = jsonString(k, v, &spec)
		case "time":
			err = jsonString(k, v, &timeRaw)
		case "subject":
			err = jsonString(k, v, &e.Subject)
		case "datacontenttype":
			err = jsonString(k, v, &e.DataContentType)
		case "data":
			if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				hasData = true
				e.Data = []byte(v)
			}
		case "data_base64":
			hasB64 = true
			err = jsonString(k, v, &b64)
		default:
			if !validAttributeName(k) {
				return Event{}, contracts.Reject(contracts.RejectInvalidField, "attribute name %q: attribute names are lower-case letters and digits", k)
			}
			var s string
			switch t := bytes.TrimSpace(v); {
			case len(t) > 0 && t[0] == '"':
				err = jsonString(k, v, &s)
			case bytes.Equal(t, []byte("null")):
				continue
			case len(t) > 0 && (t[0] == '{' || t[0] == '['):
				err = contracts.Reject(contracts.RejectInvalidField, "extension attribute %s must be a string, number or boolean", k)
			default:
				s = string(t)
			}
			if err == nil {
				if e.Extensions == nil {
					e.Extensions = make(map[string]string, 2)
				}
				e.Extensions[k] = s
			}
		}
		if err != nil {
			return Event{}, err
		}
	}
	if _, ok := raw["specversion"]; !ok {
		return Event{}, contracts.Reject(contracts.RejectMissingAttribute, "missing required attribute specversion")
	}
	if hasData && hasB64 {
		return Event{}, contracts.Reject(contracts.RejectInvalidField, "structured CloudEvent has both data and data_base64")
	}
	if e.DataContentType != "" && !isJSONMediaType(e.DataContentType) {
		return Event{}, contracts.Reject(contracts.RejectUnsupportedContent, "data content type %q is not supported (want %s)", e.DataContentType, ContentTypeJSON)
	}
	if hasB64 {
		d, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return Event{}, contracts.Reject(contracts.RejectInvalidField, "data_base64 is not valid base64: %v", err)
		}
		e.Data = d
	}
	if err := finishAttributes(&e, spec, timeRaw, false); err != nil {
		return Event{}, err
	}
	return e, nil
}

// finishAttributes checks the required attributes and parses the time.
func finishAttributes(e *Event, spec, timeRaw string, binary bool) error {
	name := func(attr string) string {
		if binary {
			return headerPrefix + attr
		}
		return attr
	}
	if spec != SpecVersion {
		return contracts.Reject(contracts.RejectInvalidField, "unsupported specversion %q (want %s)", spec, SpecVersion)
	}
	switch {
	case e.ID == "":
		return contracts.Reject(contracts.RejectMissingAttribute, "missing required attribute %s", name("id"))
	case e.Source == "":
		return contracts.Reject(contracts.RejectMissingAttribute, "missing required attribute %s", name("source"))
	case e.Type == "":
		return contracts.Reject(contracts.RejectMissingAttribute, "missing required attribute %s", name("type"))
	}
	if timeRaw != "" {
		t, err := time.Parse(time.RFC3339Nano, timeRaw)
		if err != nil {
			return contracts.Reject(contracts.RejectInvalidField, "attribute %s is not an RFC 3339 timestamp: %q", name("time"), timeRaw)
		}
		e.Time = t
	}
	return nil
}

func jsonString(k string, v json.RawMessage, dst *string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return contracts.Reject(contracts.RejectInvalidField, "attribute %s must be a JSON string", k)
	}
	return nil
}

// ExpectType returns a wrong_type rejection unless e.Type is one of types — or
// unsupported_format when it is another ".vN" version of one of them, a format this
// reader does not read. With no types every event type is accepted.
func ExpectType(e Event, types ...string) error {
	if len(types) == 0 {
		return nil
	}
	for _, t := range types {
		if e.Type == t {
			return nil
		}
	}
	if other, ok := contracts.OtherVersion(e.Type, types...); ok {
		return contracts.Reject(contracts.RejectUnsupportedFormat, "event type %q is another format version of %q, which is what this version reads", e.Type, other)
	}
	return contracts.Reject(contracts.RejectWrongType, "event type %q is not accepted here (want %s)", e.Type, strings.Join(types, " or "))
}

// HeaderAttribute reads one binary-mode attribute header (a HeaderX name) the way DecodeMsg
// does: the name matched case-insensitively as the CloudEvents NATS binding requires, the value
// percent-decoded. ok reports whether the header is present; err whether its value is unreadable.
// It lets a consumer look at an event's type before paying for a full decode.
func HeaderAttribute(h nats.Header, name string) (value string, ok bool, err error) {
	raw, ok := h[name]
	if !ok || len(raw) == 0 {
		ok = false
		for k, vs := range h {
			if len(vs) > 0 && strings.EqualFold(k, name) {
				raw, ok = vs, true
				break
			}
		}
	}
	if !ok {
		return "", false, nil
	}
	value, err = percentDecode(raw[0])
	if err != nil {
		return "", true, contracts.Reject(contracts.RejectInvalidUTF8, "header %s: %v", name, err)
	}
	return value, true, nil
}

func orErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// lowerASCII lower-cases ASCII letters, allocating only when s has an upper-case letter.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// mediaType returns the media type of a Content-Type value without parameters, trimmed.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.TrimSpace(ct)
}

func hasMediaType(ct, want string) bool { return strings.EqualFold(mediaType(ct), want) }

func isJSONMediaType(ct string) bool { return hasMediaType(ct, ContentTypeJSON) }

func sameMediaType(a, b string) bool { return strings.EqualFold(mediaType(a), mediaType(b)) }

const upperHex = "0123456789ABCDEF"

// mustEscape reports whether a byte of a header value is percent-encoded: space, '"', '%'
// and everything outside printable ASCII (NATS binding draft §3.1.3.2, as in the HTTP
// binding).
func mustEscape(c byte) bool { return c <= ' ' || c >= 0x7f || c == '"' || c == '%' }

// percentEncode encodes s for a ce-* header value; it returns s itself when nothing needs
// encoding, which is the common case for awaken's subject-safe identifiers.
func percentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c) {
			b = append(b, '%', upperHex[c>>4], upperHex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// percentDecode reverses percentEncode. A '%' not followed by two hex digits is kept
// literally (producers such as sdk-go do not encode), and the result must be UTF-8.
func percentDecode(s string) (string, error) {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("value is not valid UTF-8")
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
				continue
			}
		}
		b = append(b, c)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("percent-decoded value is not valid UTF-8")
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
