package mcpbridge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestProgressTee: the tee passes an event stream through unchanged, whatever the read
// sizes, and delivers exactly the progress notifications of its route's tokens, in stream
// order, however the lines end; events that are not progress (a response, a request with
// an id, a named event, one too large to be a notification) deliver nothing.
func TestProgressTee(t *testing.T) {
	progress := func(token string, n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%d,"total":9}}`, token, n)
	}
	stream := strings.Join([]string{
		": a comment\n",
		"event: message\nid: 1\ndata: " + progress("tok", 1) + "\n\n",
		"data: " + progress("other", 99) + "\n\n", // a token no call holds
		"data:" + progress("tok", 2) + "\r\n\r\n", // no space after the colon; CRLF
		"data: " + progress("tok", 3) + "\r\r",    // CR alone ends lines too
		// A multi-line data field is joined with newlines: JSON allows them between tokens.
		"data: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":4}}\n\n",
		"event: other\ndata: " + progress("tok", 50) + "\n\n",                                          // not a message event
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"notifications/progress\",\"params\":{}}\n\n", // has an id: a request
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("x", 2*maxProgressEvent) + "\"}]}}\n\n",
		"data: " + progress("tok", 5) + "\n\n",
		"data: " + progress("tok", 6), // the stream ends inside an event: not dispatched
	}, "")
	for _, tc := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte per read", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var routes progressRoutes
			var got []float64
			token, closeRoute := routes.open("op", func(p, _ float64, _ string) { got = append(got, p) })
			defer closeRoute()
			resp := &http.Response{
				Header: http.Header{"Content-Type": []string{"text/event-stream; charset=utf-8"}},
				Body:   io.NopCloser(tc.wrap(strings.NewReader(strings.ReplaceAll(stream, `"tok"`, fmt.Sprintf("%q", token))))),
			}
			teeProgress(resp, &routes)
			passed, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ReplaceAll(stream, `"tok"`, fmt.Sprintf("%q", token)); !bytes.Equal(passed, []byte(want)) {
				t.Errorf("the stream was changed: %d bytes passed, %d written", len(passed), len(want))
			}
			if want := []float64{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
				t.Errorf("delivered %v, want %v", got, want)
			}
		})
	}
}

// TestProgressTee_onlyEventStreams: a JSON response body is left alone (it holds one
// message, never a notification).
func TestProgressTee_onlyEventStreams(t *testing.T) {
	body := io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	resp := &http.Response{Header: http.Header{"Content-Type": []string{"application/json"}}, Body: body}
	teeProgress(resp, &progressRoutes{})
	if resp.Body != body {
		t.Errorf("a JSON body was wrapped")
	}
}
