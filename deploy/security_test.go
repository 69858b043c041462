package deploy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// startSecureAPI is a secure server with the streams and buckets created and only the api
// running, as its own user: enough for the api's doors without compiling the sandbox's
// modules.
func startSecureAPI(t *testing.T) (*secureStack, jetstream.JetStream) {
	t.Helper()
	s := startSecureServer(t)
	ctx := ctxFor(t, 2*time.Minute)
	js, log := s.setUp(t, ctx)
	s.useAPI(t, s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: "127.0.0.1:0"}}))
	return s, js
}

// TestSecure_apiRepliesOnlyIntoInboxes: the platform may
// ask the api for the tool catalog, and once could name any subject as the reply — a
// pause key, the tool descriptors, a call record, a results or audit subject — which the
// api then wrote with its own credentials (allow_responses overrides the publish lists).
// Now the api answers only into inboxes, and its user may publish nowhere else: every
// forged reply leaves the buckets and streams untouched, while the platform's own
// request is answered.
func TestSecure_apiRepliesOnlyIntoInboxes(t *testing.T) {
	t.Parallel()
	s, js := startSecureAPI(t)
	ctx := ctxFor(t, time.Minute)
	names := s.cfg.Names()
	platform := s.connect(t, deploy.UserPlatform)
	tools := httpapi.MicroSubject(contracts.DefaultPrefix, httpapi.EndpointToolsList)
	pauseKey := contracts.ToolPauseKey("echo")
	forged := []string{
		"$KV." + names.ToolPausesBucket() + "." + pauseKey,
		"$KV." + names.ToolsBucket() + "." + contracts.ToolDescriptorsKey(contracts.TargetBrain),
		"$KV." + names.CallsBucket() + ".forged.1.c1",
		names.ResultsSubject("forged"),
		names.AuditSubject("forged"),
	}
	for _, reply := range forged {
		if err := platform.PublishRequest(tools, reply, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := platform.Flush(); err != nil {
		t.Fatal(err)
	}
	// The platform's own request, sent after the forged ones on the same connection, is
	// answered; the forged ones were handled (and refused) no later than it.
	if _, err := s.client.Tools(ctx); err != nil {
		t.Fatalf("platform client.Tools: %v", err)
	}
	for _, bucket := range []string{names.ToolPausesBucket(), names.ToolsBucket(), names.CallsBucket()} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			t.Errorf("bucket %s holds key %s after the forged replies", bucket, k)
		}
	}
	for _, stream := range []string{names.ResultsStream(), names.AuditStream()} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("stream %s holds %d messages after the forged replies", stream, n)
		}
	}
	if v := s.takeViolations(); len(v) != 0 {
		t.Errorf("the api attempted a publish its grants refuse: %v", v)
	}
}

// TestSecure_apiUserPublishesRepliesOnlyIntoInboxes: the grant itself. A connection as
// the api user that answers a request whose reply names the tool descriptors' key is
// refused by the server (nothing is stored), whatever the api's code does; a reply into
// an inbox passes. (The api writes the pause bucket itself, so only its code keeps a
// reply off a pause key: TestSecure_apiRepliesOnlyIntoInboxes.)
func TestSecure_apiUserPublishesRepliesOnlyIntoInboxes(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t)
	ctx := ctxFor(t, time.Minute)
	js, _ := s.setUp(t, ctx)
	names := s.cfg.Names()
	apiConn := s.connect(t, deploy.UserAPI)
	subject := httpapi.MicroSubject(contracts.DefaultPrefix, httpapi.EndpointToolsList)
	if _, err := apiConn.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(`{"tools":[]}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := apiConn.Flush(); err != nil {
		t.Fatal(err)
	}
	platform := s.connect(t, deploy.UserPlatform)
	if m, err := platform.RequestWithContext(ctx, subject, nil); err != nil || string(m.Data) != `{"tools":[]}` {
		t.Fatalf("request with an inbox reply: %v", err)
	}
	descKey := contracts.ToolDescriptorsKey(contracts.TargetBrain)
	forged := "$KV." + names.ToolsBucket() + "." + descKey
	if err := platform.PublishRequest(subject, forged, nil); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, names.ToolsBucket())
	if err != nil {
		t.Fatal(err)
	}
	var stored bool
	natstest.WaitFor(t, 30*time.Second, func() bool {
		if _, err := kv.Get(ctx, descKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
			stored = true
			return true
		}
		for _, v := range s.takeViolations() {
			if strings.HasPrefix(v, deploy.UserAPI+":") && strings.Contains(v, forged) {
				return true
			}
		}
		return false
	}, "the server refuses the api's reply onto the descriptors key")
	if stored {
		t.Fatalf("the api user's reply was stored under the descriptors key")
	}
}

// TestSecure_apiEventsAreFromAwakenAPI: the tool-pause audit
// the api publishes carries ce-source awaken/api, as docs/protocol.md says services do
// (awaken/{service}), like its commands — not the micro service's name (awaken/awaken).
func TestSecure_apiEventsAreFromAwakenAPI(t *testing.T) {
	t.Parallel()
	s, js := startSecureAPI(t)
	ctx := ctxFor(t, time.Minute)
	if st, body := apiDo(t, ctx, "POST", s.apiURL, "/v1/tools/echo/pause", contracts.ToolPauseRequest{Reason: "source"}, nil); st != 200 {
		t.Fatalf("POST pause: %d %s", st, body)
	}
	stream, err := js.Stream(ctx, s.cfg.Names().AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, s.cfg.Names().ToolPauseAuditSubject())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("ce-source"); got != "awaken/api" {
		t.Errorf("tool pause audit ce-source %q, want awaken/api", got)
	}
}

// TestSecure_objectsAreVerifiedAgainstTheirName: an executor
// credential may write the objects bucket, so it could overwrite a run's stored output.
// The readers check the bytes against the digest in the object's name: the api answers
// 502 object_digest_mismatch and pkg/client returns ErrObjectDigest; an object whose
// bytes match is served.
func TestSecure_objectsAreVerifiedAgainstTheirName(t *testing.T) {
	t.Parallel()
	s, _ := startSecureAPI(t)
	ctx := ctxFor(t, time.Minute)
	exec, err := jetstream.New(s.connect(t, "brain-exec"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := exec.ObjectStore(ctx, s.cfg.Names().ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		t.Helper()
		if _, err := st.Put(ctx, jetstream.ObjectMeta{Name: name, Headers: nats.Header{"Content-Type": []string{contracts.MimeTypeText}}}, bytes.NewReader(data)); err != nil {
			t.Fatalf("put %s as brain-exec: %v", name, err)
		}
	}
	nameOf := func(op string, data []byte) string {
		sum := sha256.Sum256(data)
		return contracts.ObjectName(op, hex.EncodeToString(sum[:]))
	}
	good := []byte("the output the link names")
	goodName := nameOf(contracts.OperationID("objrun", 1, "c1"), good)
	put(goodName, good)
	// The bytes of another output under a name that carries the first one's digest: an
	// overwrite after the link was published.
	forgedName := nameOf(contracts.OperationID("objrun", 1, "c2"), good)
	put(forgedName, []byte("forged bytes"))

	if st, body := apiDo(t, ctx, "GET", s.apiURL, "/v1/objects/"+goodName, nil, nil); st != http.StatusOK || body != string(good) {
		t.Errorf("GET the intact object: %d %q", st, body)
	}
	st2, body := apiDo(t, ctx, "GET", s.apiURL, "/v1/objects/"+forgedName, nil, nil)
	if st2 != http.StatusBadGateway || !strings.Contains(body, httpapi.CodeObjectDigest) {
		t.Errorf("GET the overwritten object: %d %s, want 502 %s", st2, body, httpapi.CodeObjectDigest)
	}
	if data, _, err := s.client.Object(ctx, goodName); err != nil || string(data) != string(good) {
		t.Errorf("client.Object of the intact object: %q %v", data, err)
	}
	if data, _, err := s.client.Object(ctx, forgedName); !errors.Is(err, client.ErrObjectDigest) {
		t.Errorf("client.Object of the overwritten object: %q %v, want ErrObjectDigest", data, err)
	}
}
