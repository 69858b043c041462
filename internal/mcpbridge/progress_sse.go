package mcpbridge

import (
	"bytes"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxProgressEvent bounds what the progress tee buffers of one server-sent event: a
// progress notification is a few hundred bytes, and a larger event (a tool's result)
// passes through unbuffered.
const maxProgressEvent = 64 << 10

// progressTee is the body of a streamable HTTP server's event stream (text/event-stream)
// as the SDK reads it: every byte passes through unchanged, and a notifications/progress
// event is handed to its call's route as soon as its last byte has been read — before the
// SDK sees the bytes that follow, so before the response the server wrote after it. This
// is [progressConn]'s guarantee over HTTP, where the SDK's connection cannot be wrapped:
// the SDK queues notifications for a handler goroutine but hands a response straight to
// the waiting call, and a report could otherwise reach its route after the call closed it.
type progressTee struct {
	io.ReadCloser
	routes *progressRoutes

	line     []byte // the current line, without its end
	lineLong bool   // the current line outgrew maxProgressEvent: not a progress event
	afterCR  bool   // the last byte was '\r' (a following '\n' ends no second line)
	event    []byte // data of the event being read
	skip     bool   // the event being read cannot be a progress notification
}

// teeProgress wraps resp's body when it is an event stream.
func teeProgress(resp *http.Response, routes *progressRoutes) {
	if resp == nil || resp.Body == nil || routes == nil {
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return
	}
	resp.Body = &progressTee{ReadCloser: resp.Body, routes: routes}
}

// Read implements io.Reader: the bytes are scanned (and complete progress events
// delivered) before they are returned.
func (t *progressTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.scan(p[:n])
	return n, err
}

// scan splits b into lines as the SSE format defines them (ended by "\r\n", "\n" or "\r").
func (t *progressTee) scan(b []byte) {
	for len(b) > 0 {
		if t.afterCR && b[0] == '\n' {
			b = b[1:]
		}
		t.afterCR = false
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			t.appendLine(b)
			return
		}
		t.appendLine(b[:i])
		t.afterCR = b[i] == '\r'
		t.endLine()
		t.line, t.lineLong = t.line[:0], false
		b = b[i+1:]
	}
}

func (t *progressTee) appendLine(b []byte) {
	if t.lineLong || len(t.line)+len(b) > maxProgressEvent {
		t.lineLong = true
		return
	}
	t.line = append(t.line, b...)
}

// endLine applies one complete line: a data field is collected, an empty line ends the
// event. Other fields (event, id, retry) and comments do not matter here: the MCP
// transport sends its JSON-RPC messages as the data of default "message" events.
func (t *progressTee) endLine() {
	switch {
	case len(t.line) == 0 && !t.lineLong:
		if !t.skip && len(t.event) > 0 {
			t.deliver(t.event)
		}
		t.event, t.skip = t.event[:0], false
	case t.lineLong:
		t.skip = true // no line of a progress notification is this long
	case bytes.HasPrefix(t.line, []byte("data:")) || bytes.Equal(t.line, []byte("data")):
		value := bytes.TrimPrefix(bytes.TrimPrefix(t.line, []byte("data")), []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if len(t.event)+len(value)+1 > maxProgressEvent {
			t.skip = true
			return
		}
		if len(t.event) > 0 {
			t.event = append(t.event, '\n')
		}
		t.event = append(t.event, value...)
	case bytes.HasPrefix(t.line, []byte("event:")):
		if name := bytes.TrimSpace(t.line[len("event:"):]); len(name) > 0 && !bytes.Equal(name, []byte("message")) {
			t.skip = true
		}
	}
}

// deliver hands data to its route when it is a progress notification.
func (t *progressTee) deliver(data []byte) {
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		t.routes.deliverMessage(msg)
	}
}
