package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// apiDo sends one request to the api's HTTP server at base (its base URL) with body as
// JSON (none when nil), decodes a 2xx JSON answer into out (when not nil), and returns
// the status and the raw answer.
func apiDo(t *testing.T, ctx context.Context, method, base, path string, body, out any) (int, string) {
	t.Helper()
	return apiDoAs(t, ctx, "", method, base, path, body, out)
}

// apiDoAs is apiDo with the bearer token token ("" for none).
func apiDoAs(t *testing.T, ctx context.Context, token, method, base, path string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		// The api refuses a mutating request of any other type (cross-site protection).
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode, string(data)
}

// apiEvents opens the api's server-sent event stream (GET /v1/stream) and returns the
// names of the events it sends, "hello" first. The channel closes when the stream ends
// (with ctx).
func apiEvents(t *testing.T, ctx context.Context, base string) <-chan string {
	t.Helper()
	return apiEventsAt(t, ctx, base, "/v1/stream")
}

// apiEventsAt is apiEvents for the event stream at path.
func apiEventsAt(t *testing.T, ctx context.Context, base, path string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("event stream: status %d", resp.StatusCode)
	}
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			name, ok := strings.CutPrefix(sc.Text(), "event: ")
			if !ok {
				continue
			}
			select {
			case ch <- name:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// waitEvents reads events until every one of want was seen, failing the test when the
// stream ends or ctx is done first.
func waitEvents(t *testing.T, ctx context.Context, events <-chan string, want ...string) {
	t.Helper()
	missing := make(map[string]bool)
	for _, w := range want {
		missing[w] = true
	}
	for len(missing) > 0 {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("event stream ended; never saw %v", missing)
			}
			delete(missing, e)
		case <-ctx.Done():
			t.Fatalf("events %v not seen: %v", missing, ctx.Err())
		}
	}
}
