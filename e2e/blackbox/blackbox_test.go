// Package blackbox_test drives a running `awaken dev` the way a new user in another
// language would: it imports nothing of awaken, only nats.go, and speaks the public
// wire protocol — CloudEvents in binary and structured mode, results read from
// the results stream.
package blackbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// repoRoot is the module root: a test runs in its package's directory (not
// runtime.Caller, whose file name is module-relative under -trimpath).
func repoRoot() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}

// freePort is internal/testnet.FreePort, copied: this test imports nothing of awaken.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDev builds the awaken binary and runs `awaken dev` until the test ends.
func startDev(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "awaken")
	build := exec.Command("go", "build", "-o", bin, "./cmd/awaken")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build awaken: %v\n%s", err, out)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "dev", "--listen", addr, "--data", filepath.Join(dir, "data"),
		"--config", filepath.Join(repoRoot(), "examples", "awaken.yaml"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if os.Getenv("AWAKEN_TEST_LOG") == "" {
		cmd.Stderr = nil
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("awaken dev did not shut down within 30s of SIGINT")
		}
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "ready") {
				ready <- line
			}
		}
	}()
	select {
	case line := <-ready:
		t.Logf("awaken dev: %s", line)
	case <-time.After(90 * time.Second):
		t.Fatal("awaken dev printed no ready line within 90s")
	}
	return "nats://" + addr
}

func ce(subject, id, typ string, body any) *nats.Msg {
	data, _ := json.Marshal(body)
	m := nats.NewMsg(subject)
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", id)
	m.Header.Set("ce-source", "blackbox-test")
	m.Header.Set("ce-type", typ)
	m.Header.Set("ce-time", time.Now().UTC().Format(time.RFC3339Nano))
	m.Header.Set("Content-Type", "application/json")
	m.Header.Set("Nats-Msg-Id", id)
	m.Data = data
	return m
}

type result struct {
	BatchID string `json:"batch_id"`
	RunID   string `json:"run_id"`
	Index   int    `json:"index"`
	CallID  string `json:"call_id"`
	ToolID  string `json:"tool_id"`
	Outcome string `json:"outcome"`
	Output  struct {
		CallID  string `json:"call_id"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"is_error"`
	} `json:"output"`
}

// readBatch reads the run's results subject from the stream until the batch's results
// message (or the finalized event ending its atomic batch), returning the results and the
// finalized payload.
func readBatch(t *testing.T, js jetstream.JetStream, run, batchID string) ([]result, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	subject := "awaken.results." + run
	stream, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		t.Fatalf("no stream holds %s: %v", subject, err)
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var results []result
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(55 * time.Second))
		if err != nil {
			t.Fatalf("waiting for results of %s: %v", batchID, err)
		}
		if msg.Headers().Get("ce-specversion") != "1.0" || msg.Headers().Get("ce-id") == "" {
			t.Errorf("result message is not a binary-mode CloudEvent: %v", msg.Headers())
		}
		switch msg.Headers().Get("ce-type") {
		case "io.awaken.tool.result.v1":
			var r result
			if err := json.Unmarshal(msg.Data(), &r); err != nil {
				t.Fatal(err)
			}
			if r.BatchID == batchID {
				results = append(results, r)
			}
		case "io.awaken.toolbatch.finalized.v1":
			var f map[string]any
			if err := json.Unmarshal(msg.Data(), &f); err != nil {
				t.Fatal(err)
			}
			if f["batch_id"] == batchID {
				return results, f
			}
		case "io.awaken.toolbatch.results.v1":
			// A batch in one message (a batch too large for one comes as the two types
			// above, in one atomic batch).
			var b struct {
				BatchID   string         `json:"batch_id"`
				Results   []result       `json:"results"`
				Finalized map[string]any `json:"finalized"`
			}
			if err := json.Unmarshal(msg.Data(), &b); err != nil {
				t.Fatal(err)
			}
			if b.BatchID == batchID {
				return b.Results, b.Finalized
			}
		default:
			t.Errorf("unexpected ce-type on the results subject: %q", msg.Headers().Get("ce-type"))
		}
	}
}

func TestBlackBox_newUserSession(t *testing.T) {
	url := startDev(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// 1. A batch in binary mode, ce-id = batch id, as a simple client may send it.
	batch := map[string]any{
		"run_id": "bb-run", "thread_id": "bb-thread", "step": 1,
		"agent": map[string]any{"snapshot_id": "snap", "tools": []string{"echo", "counter", "forbidden"}},
		"calls": []map[string]any{
			{"call_id": "c1", "tool_id": "echo", "arguments": map[string]any{"text": "hi"}},
			{"call_id": "c2", "tool_id": "counter", "arguments": map[string]any{"name": "bb"}},
			{"call_id": "c3", "tool_id": "forbidden", "arguments": map[string]any{}},
		},
	}
	ack, err := js.PublishMsg(ctx, ce("awaken.batches.submit", "tool-batch:bb-run:1", "io.awaken.toolbatch.requested.v1", batch))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if ack.Duplicate {
		t.Fatal("first submission reported as duplicate")
	}
	results, fin := readBatch(t, js, "bb-run", "tool-batch:bb-run:1")
	want := []string{"hi", "1", "blocked: tool forbidden denied by policy"}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d", len(results), len(want))
	}
	for i, r := range results {
		if r.Index != i || len(r.Output.Content) == 0 || r.Output.Content[0].Text != want[i] {
			t.Errorf("result %d: %+v, want %q", i, r, want[i])
		}
	}
	if ids, _ := fin["call_ids"].([]any); len(ids) != 3 {
		t.Errorf("finalized call_ids: %v", fin["call_ids"])
	}

	// 2. The same batch again: the stream deduplicates it.
	ack, err = js.PublishMsg(ctx, ce("awaken.batches.submit", "tool-batch:bb-run:1", "io.awaken.toolbatch.requested.v1", batch))
	if err != nil || !ack.Duplicate {
		t.Errorf("resubmission: ack %+v err %v, want a duplicate ack", ack, err)
	}

	// 3. A batch in structured mode.
	structured := map[string]any{
		"specversion": "1.0", "id": "tool-batch:bb-run:2", "source": "blackbox-test",
		"type": "io.awaken.toolbatch.requested.v1", "datacontenttype": "application/json",
		"data": map[string]any{
			"run_id": "bb-run", "thread_id": "bb-thread", "step": 2,
			"agent": map[string]any{"snapshot_id": "snap", "tools": []string{"echo"}},
			"calls": []map[string]any{{"call_id": "c1", "tool_id": "echo", "arguments": map[string]any{"text": "structured"}}},
		},
	}
	body, _ := json.Marshal(structured)
	m := nats.NewMsg("awaken.batches.submit")
	m.Header.Set("Content-Type", "application/cloudevents+json")
	m.Header.Set("Nats-Msg-Id", "tool-batch:bb-run:2")
	m.Data = body
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	results, _ = readBatch(t, js, "bb-run", "tool-batch:bb-run:2")
	if len(results) != 1 || results[0].Output.Content[0].Text != "structured" {
		t.Errorf("structured-mode batch: %+v", results)
	}

	// 4. A malformed batch is rejected with a code on awaken.batches.rejected.
	rej := make(chan map[string]any, 1)
	sub, err := nc.Subscribe("awaken.batches.rejected", func(m *nats.Msg) {
		var r map[string]any
		if json.Unmarshal(m.Data, &r) == nil {
			rej <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()
	bad := map[string]any{"run_id": "bad run", "thread_id": "t", "step": 1,
		"agent": map[string]any{"snapshot_id": "s", "tools": []string{}},
		"calls": []map[string]any{{"call_id": "c1", "tool_id": "echo", "arguments": map[string]any{}}}}
	if _, err := js.PublishMsg(ctx, ce("awaken.batches.submit", "bad-1", "io.awaken.toolbatch.requested.v1", bad)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rej:
		if r["code"] != "invalid_id" || r["event_id"] != "bad-1" {
			t.Errorf("rejection %v", r)
		}
	case <-ctx.Done():
		t.Fatal("no rejection for a batch with an invalid run_id")
	}
}
