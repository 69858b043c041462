package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestResolveLinks: a link to a content object is replaced by its blocks, a link to a text
// object by one text block; other blocks, links elsewhere and objects of other types stay;
// a link to no object is ErrObjectNotFound.
func TestResolveLinks(t *testing.T) {
	e := newTestEnv(t)
	ctx := servicetest.Context(t, 30*time.Second)
	st, err := e.js.ObjectStore(ctx, e.names.ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	put := func(name, mimeType string, data []byte) {
		t.Helper()
		if _, err := st.Put(ctx, jetstream.ObjectMeta{Name: name, Headers: nats.Header{"Content-Type": []string{mimeType}}}, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	// Object names carry the digest of their bytes, which the reader verifies.
	nameOf := func(op string, data []byte) string {
		sum := sha256.Sum256(data)
		return contracts.ObjectName(op, hex.EncodeToString(sum[:]))
	}
	blocks := []contracts.ContentBlock{{Type: contracts.BlockText, Text: "first"}, {Type: contracts.BlockText, Text: "second"}}
	blocksJSON, _ := json.Marshal(blocks)
	blocksName, textName, otherName := nameOf("op-blocks", blocksJSON), nameOf("op-text", []byte("the text")), nameOf("op-other", []byte("%PDF"))
	put(blocksName, contracts.MimeTypeContent, blocksJSON)
	put(textName, contracts.MimeTypeText, []byte("the text"))
	put(otherName, "application/pdf", []byte("%PDF"))

	c := e.c
	foreign := contracts.ContentBlock{Type: contracts.BlockResourceLink, URI: "https://example.com/x", Name: "x"}
	out := contracts.BlocksOutput("c1", []contracts.ContentBlock{
		{Type: contracts.BlockText, Text: "before"},
		contracts.ResourceLink(blocksName, contracts.MimeTypeContent, int64(len(blocksJSON))),
		contracts.ResourceLink(textName, contracts.MimeTypeText, 8),
		contracts.ResourceLink(otherName, "application/pdf", 4),
		foreign,
	}, false)
	got, err := c.ResolveLinks(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	want := contracts.BlocksOutput("c1", []contracts.ContentBlock{
		{Type: contracts.BlockText, Text: "before"}, blocks[0], blocks[1],
		{Type: contracts.BlockText, Text: "the text"},
		contracts.ResourceLink(otherName, "application/pdf", 4), foreign,
	}, false)
	if !got.Equal(want) {
		t.Errorf("resolved %+v\nwant %+v", got.Content, want.Content)
	}
	missing := contracts.BlocksOutput("c1", []contracts.ContentBlock{contracts.ResourceLink("op.gone", contracts.MimeTypeText, 1)}, false)
	if _, err := c.ResolveLinks(ctx, missing); !errors.Is(err, ErrObjectNotFound) {
		t.Errorf("a link to no object: %v, want ErrObjectNotFound", err)
	}
}
