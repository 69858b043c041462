package contracts

import (
	"fmt"
	"strings"
)

// Large outputs travel by reference: an output whose JSON exceeds the inline limit is
// stored in the objects bucket and its content is replaced by one [BlockResourceLink]
// block naming the object.
const (
	// DefaultInlineOutputBytes is the largest output (its JSON) carried inline in call
	// records and results, unless the configuration lowers it (256 KiB).
	DefaultInlineOutputBytes = 256 << 10
	// MaxOutputBytes is the hard limit of one output's JSON, inline or by reference
	// (64 MiB). A larger output completes the call with the execution error
	// "output exceeds 67108864 bytes".
	MaxOutputBytes = 64 << 20
	// ObjectURIPrefix starts the uri of every resource_link to the objects bucket.
	ObjectURIPrefix = "awaken://objects/"
	// MimeTypeText is the media type of an object holding the text of a text-only output
	// of one block: resolving it gives that one text block back.
	MimeTypeText = "text/plain; charset=utf-8"
	// MimeTypeContent is the media type of an object holding the JSON array of an output's
	// content blocks: resolving it splices those blocks back in place of the link.
	MimeTypeContent = "application/vnd.awaken.content+json"
)

// ObjectsBucket is the JetStream object store of outputs stored by reference.
func (n Names) ObjectsBucket() string { return n.upper() + "_objects" }

// ObjectName is the name of the object holding an output of the call operationID whose
// stored bytes have the hex SHA-256 digest digestHex: the operation id (so an object names
// its call) and the first 16 hex digits of the digest (so a body run again after a crash
// never overwrites the bytes a committed link points at, and the same bytes always land
// under the same name). The name is URL-path safe.
func ObjectName(operationID, digestHex string) string {
	if len(digestHex) > 16 {
		digestHex = digestHex[:16]
	}
	return operationID + "." + digestHex
}

// ObjectURI is the resource_link uri of the object name.
func ObjectURI(name string) string { return ObjectURIPrefix + name }

// ObjectNameOfURI returns the object name of an awaken object uri, and false for any other
// uri (a link a tool returned itself, which no one resolves).
func ObjectNameOfURI(uri string) (string, bool) {
	name, ok := strings.CutPrefix(uri, ObjectURIPrefix)
	if !ok || ValidateObjectName(name) != nil {
		return "", false
	}
	return name, true
}

// MaxObjectNameLength bounds an object name: the longest [ObjectName] is 592 bytes (an
// operation id with a 200-byte run id, a 19-digit step and the 343-byte encoding of a
// 256-byte call id, then "." and 16 hex digits).
const MaxObjectNameLength = 640

// ValidateObjectName checks an object name as the api accepts it: an operation id and a
// digest, made of [A-Za-z0-9_:.=-] only ('=' starts an encoded call id, [EncodeCallID]), at
// most [MaxObjectNameLength] bytes.
func ValidateObjectName(name string) error {
	if name == "" || len(name) > MaxObjectNameLength {
		return fmt.Errorf("object name must be 1..%d bytes", MaxObjectNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ':' || c == '.' || c == '=') {
			return fmt.Errorf("object name %q holds %q; only [A-Za-z0-9_:.=-] are allowed", name, c)
		}
	}
	return nil
}

// ResourceLink returns the content block linking to the object name.
func ResourceLink(name, mimeType string, size int64) ContentBlock {
	return ContentBlock{Type: BlockResourceLink, URI: ObjectURI(name), Name: name, MimeType: mimeType, Size: size}
}

// ToolProgress is the payload of io.awaken.tool.progress.v1 on the run's events subject:
// how far a running tool body says it is. It is a fact about a call in flight, never part
// of its result: it is published best effort and throttled, and losing one changes nothing.
type ToolProgress struct {
	BatchID string `json:"batch_id"`
	RunID   string `json:"run_id"`
	Step    int64  `json:"step"`
	Index   int    `json:"index"`
	CallID  string `json:"call_id"`
	ToolID  string `json:"tool_id"`
	// Attempt is the executor entry the body runs in (see the call record's phase).
	Attempt uint16 `json:"attempt"`
	// Seq numbers the progress reports of one attempt from 1, as the tool made them;
	// throttling skips numbers, and a consumer keeps the highest it saw.
	Seq uint64 `json:"seq"`
	// Progress increases with every report; Total, when known, is its end (MCP's
	// notifications/progress semantics).
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// LinkText is the plain-text view of the resource_link blocks of o, "{uri} ({size}
// bytes)" each, joined by "\n": what a human view shows for an output stored by reference,
// whose [ToolOutput.Text] is empty.
func (o ToolOutput) LinkText() string {
	var parts []string
	for _, b := range o.Content {
		if b.Type == BlockResourceLink {
			parts = append(parts, fmt.Sprintf("%s (%d bytes)", b.URI, b.Size))
		}
	}
	return strings.Join(parts, "\n")
}
