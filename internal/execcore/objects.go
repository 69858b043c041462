package execcore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// objectPutTries bounds the local retries of storing a large output before the handler
// gives up and lets the request be redelivered (which then recovers the call by policy).
const objectPutTries = 5

// objectStore opens the objects bucket once, on the first large output, so an executor
// whose tools never return one needs no access to it.
type objectStore struct {
	mu    sync.Mutex
	store jetstream.ObjectStore
}

func (o *objectStore) open(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.ObjectStore, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.store != nil {
		return o.store, nil
	}
	st, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", bucket, err)
	}
	o.store = st
	return st, nil
}

// inlineLimit is the configured largest inline output.
func (x *Executor) inlineLimit() int {
	if x.env.Config != nil && x.env.Config.Executors.InlineOutputBytes > 0 {
		return x.env.Config.Executors.InlineOutputBytes
	}
	return contracts.DefaultInlineOutputBytes
}

// byReference returns out as it is committed: unchanged when its JSON fits the inline
// limit, otherwise with its content stored in the objects bucket and replaced by one
// resource_link block. It runs after the body and BEFORE the completion is committed, so a
// committed link always points at a stored object; the object's name is derived from the
// operation id and the bytes' digest, so storing it again after a crash or a redelivery
// writes the same object under the same name (and skips the write when it is already
// there). An error means the object could not be stored; the request is then retried.
//
// size is the length of out's JSON when the caller already encoded it (finishOutput), or
// negative to have it encoded here.
func (x *Executor) byReference(ctx context.Context, op string, out contracts.ToolOutput, size int) (contracts.ToolOutput, error) {
	limit := x.inlineLimit()
	if size < 0 {
		encoded, err := json.Marshal(out)
		if err != nil {
			return out, nil // FinishOutput already turned an unencodable output into an error
		}
		size = len(encoded)
	}
	if size <= limit {
		return out, nil
	}
	// The object holds the content; structured content is already in it as a JSON text
	// block (WithStructuredText), so the inline link does not carry it a second time.
	out = out.WithStructuredText()
	data, mimeType, err := objectBytes(out)
	if err != nil {
		return contracts.ExecutionFailed("tool output cannot be encoded: " + err.Error()).Output(out.CallID), nil
	}
	sum := sha256.Sum256(data)
	name := contracts.ObjectName(op, hex.EncodeToString(sum[:]))
	if err := x.putObject(ctx, name, mimeType, data, sum); err != nil {
		return contracts.ToolOutput{}, fmt.Errorf("%s: store large output: %w", x.opts.Service, err)
	}
	linked := out
	linked.Content = []contracts.ContentBlock{contracts.ResourceLink(name, mimeType, int64(len(data)))}
	linked.StructuredContent = nil
	if b, err := json.Marshal(linked); err == nil && len(b) > limit {
		// Only the staged state can still be too large: it must travel with the result.
		return contracts.ExecutionFailed(fmt.Sprintf("output state exceeds %d bytes", limit)).Output(out.CallID), nil
	}
	zerolog.Ctx(ctx).Info().Str("object", name).Int("bytes", len(data)).Msg("large output stored by reference")
	return linked, nil
}

// objectBytes is what the object holds: the text of an output made of one text block
// (text/plain), else the JSON array of its content blocks.
func objectBytes(out contracts.ToolOutput) ([]byte, string, error) {
	if len(out.Content) == 1 && out.Content[0].Type == contracts.BlockText {
		return []byte(out.Content[0].Text), contracts.MimeTypeText, nil
	}
	b, err := json.Marshal(out.Content)
	return b, contracts.MimeTypeContent, err
}

// putObject stores data under name unless an object with the same digest is already
// there, retrying a failed write a few times with back-off.
func (x *Executor) putObject(ctx context.Context, name, mimeType string, data []byte, sum [sha256.Size]byte) error {
	wantDigest := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
	delay := x.opts.RetryBackoff
	var err error
	for try := 0; try < objectPutTries; try++ {
		if try > 0 {
			if serr := ctxsleep.Sleep(ctx, delay); serr != nil {
				return errors.Join(err, serr)
			}
			delay = min(delay*2, x.opts.MaxRetryBackoff)
		}
		var st jetstream.ObjectStore
		if st, err = x.objects.open(ctx, x.env.JS, x.env.Names.ObjectsBucket()); err != nil {
			continue
		}
		if info, ierr := st.GetInfo(ctx, name); ierr == nil && info.Digest == wantDigest && info.Size == uint64(len(data)) {
			return nil
		}
		meta := jetstream.ObjectMeta{Name: name, Headers: nats.Header{"Content-Type": []string{mimeType}}}
		if _, err = st.Put(ctx, meta, bytes.NewReader(data)); err == nil {
			return nil
		}
		zerolog.Ctx(ctx).Warn().Err(err).Str("object", name).Int("try", try+1).Msg("storing a large output failed")
	}
	return err
}
