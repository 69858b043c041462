package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream API error codes a leader read tells apart.
const (
	jsErrNoMessageFound = 10037
	jsErrStreamNotFound = 10059
)

// ErrBucketNotFound: the bucket a leader read names does not exist.
var ErrBucketNotFound = errors.New("state: bucket not found")

// ReadLastFromLeader returns the last message stored on subject in stream as the stream's
// leader holds it: a plain message get ($JS.API.STREAM.MSG.GET), which only the leader
// answers — a direct get may be answered by a replica that has not seen the last write
// yet. A subject without messages is jetstream.ErrMsgNotFound, a stream that does not
// exist jetstream.ErrStreamNotFound; other errors are left for the caller to name the read
// they failed (the key-value reads below, the audit trail's chain head).
//
// It needs permission to publish on $JS.API.STREAM.MSG.GET.<stream>.
func ReadLastFromLeader(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return readFromLeader(ctx, nc, stream, map[string]any{"last_by_subj": subject})
}

// ReadSeqFromLeader returns the message stored at stream sequence seq of stream as the
// stream's leader holds it, like [ReadLastFromLeader]: what a duplicate acknowledgement
// names (the sequence of the message first stored under the id) is read back so.
func ReadSeqFromLeader(ctx context.Context, nc *nats.Conn, stream string, seq uint64) (*jetstream.RawStreamMsg, error) {
	return readFromLeader(ctx, nc, stream, map[string]any{"seq": seq})
}

func readFromLeader(ctx context.Context, nc *nats.Conn, stream string, get map[string]any) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(get)
	if err != nil {
		return nil, err
	}
	reply, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, err
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == jsErrNoMessageFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil && resp.Error.ErrCode == jsErrStreamNotFound:
		return nil, jetstream.ErrStreamNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("%s (%d)", resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, errors.New("empty reply")
	}
	var hdr nats.Header
	if len(resp.Message.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("headers: %w", err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Header: hdr, Data: resp.Message.Data}, nil
}

// ReadFromLeader returns the latest message stored for key in bucket as the leader of the
// bucket's stream holds it ([ReadLastFromLeader]). A key-value get is a direct get, which
// any replica answers, so in a cluster it can miss a write that is already committed (a
// follower catching up after a restart, a partition, a pause); a write whose
// acknowledgement someone received is always in the leader's answer. (A KV watcher is no
// better: its consumer is placed on any replica.) A key without a current value (never
// written, deleted or purged) is ErrNotFound; a bucket that does not exist is
// ErrBucketNotFound.
//
// It needs permission to publish on $JS.API.STREAM.MSG.GET.KV_<bucket>.
func ReadFromLeader(ctx context.Context, nc *nats.Conn, bucket, key string) (*jetstream.RawStreamMsg, error) {
	m, deleted, err := readLast(ctx, nc, bucket, key)
	switch {
	case err != nil:
		return nil, err
	case deleted:
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, bucket, key)
	}
	return m, nil
}

// readLast is [ReadFromLeader] that also returns a delete, purge or expiry marker (deleted true,
// with the marker's revision): a create after a delete must expect the marker's revision.
func readLast(ctx context.Context, nc *nats.Conn, bucket, key string) (m *jetstream.RawStreamMsg, deleted bool, err error) {
	m, err = ReadLastFromLeader(ctx, nc, "KV_"+bucket, "$KV."+bucket+"."+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, false, fmt.Errorf("%w: %s/%s", ErrNotFound, bucket, key)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, false, fmt.Errorf("%w: %s", ErrBucketNotFound, bucket)
	case err != nil:
		return nil, false, fmt.Errorf("state: read %s/%s from the leader: %w", bucket, key, err)
	}
	return m, isDeletion(m.Header), nil
}

// GetFromLeader is Get answered by the leader of the bucket's stream ([ReadFromLeader]):
// for the reads whose answer is acted on for good — an absence that drops work, a value
// that closes a barrier. Without [WithJetStream] it is Get.
func (s *Store[T]) GetFromLeader(ctx context.Context, key string) (T, uint64, error) {
	if s.opts.js == nil {
		return s.Get(ctx, key)
	}
	var zero T
	rctx, cancel := s.request(ctx)
	m, err := ReadFromLeader(rctx, s.opts.js.Conn(), s.kvOf(key).Bucket(), key)
	cancel()
	if err != nil {
		return zero, 0, err
	}
	v, err := s.decode(key, m.Data)
	if err != nil {
		return zero, 0, err
	}
	return v, m.Sequence, nil
}
