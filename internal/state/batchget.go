package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errNoMessages: none of the subjects of a batch get has a message.
var errNoMessages = errors.New("state: no message for any subject of the batch get")

// Headers of a batch direct get's answers.
const (
	statusHeader      = "Status"
	descriptionHeader = "Description"
)

// getLastMsgsFor asks stream for the last message of each of subjects with one batch direct
// get ($JS.API.DIRECT.GET.<stream> with multi_last, which any replica may answer) and calls
// yield with each answer in turn. It returns complete true when the server said it sent
// every answer (an answer's pending count reached 0, or there was no message at all,
// errNoMessages); an answer that stopped coming (ctx ended) returns complete false and no
// error.
//
// It does what github.com/synadia-io/orbit.go/jetstreamext.GetLastMsgsFor does, with a
// subscription whose buffer holds the answers it can get and no more: that one's
// synchronous subscription buffers up to the connection's 65,536 pending messages, a
// half-MiB channel allocated and cleared on every read of a batch's call records.
func getLastMsgsFor(ctx context.Context, js jetstream.JetStream, stream string, subjects []string, yield func(*jetstream.RawStreamMsg) error) (complete bool, err error) {
	req, err := json.Marshal(struct {
		MultiLastFor []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return false, err
	}
	nc := js.Conn()
	// At most one answer per subject, then the end-of-batch marker.
	ch := make(chan *nats.Msg, len(subjects)+1)
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: apiPrefix(js.Options()) + "DIRECT.GET." + stream, Reply: inbox, Data: req}); err != nil {
		return false, err
	}
	for {
		var msg *nats.Msg
		select {
		case msg = <-ch:
		case <-ctx.Done():
			return false, nil
		}
		if len(msg.Data) == 0 {
			switch msg.Header.Get(statusHeader) {
			case "204":
				if msg.Header.Get(descriptionHeader) == "EOB" {
					return complete, nil
				}
			case "404":
				return true, errNoMessages
			case "503":
				return false, nats.ErrNoResponders
			}
		}
		m, pending, err := directGetAnswer(msg)
		if err != nil {
			return false, err
		}
		complete = pending == 0
		if err := yield(m); err != nil {
			return false, err
		}
	}
}

// directGetAnswer is one answer of a batch direct get: the stored message, from the
// answer's headers and body, and how many answers are still to come.
func directGetAnswer(msg *nats.Msg) (*jetstream.RawStreamMsg, uint64, error) {
	h := msg.Header
	if len(h) == 0 {
		return nil, 0, errors.New("state: batch get: an answer without headers")
	}
	pending, err := strconv.ParseUint(h.Get("Nats-Num-Pending"), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("state: batch get: pending count: %w (does the server support batch gets?)", err)
	}
	seq, err := strconv.ParseUint(h.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("state: batch get: sequence: %w", err)
	}
	tm, err := time.Parse(time.RFC3339Nano, h.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, 0, fmt.Errorf("state: batch get: time stamp: %w", err)
	}
	subj := h.Get(jetstream.SubjectHeader)
	if subj == "" {
		return nil, 0, errors.New("state: batch get: an answer without its subject")
	}
	return &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: h, Data: msg.Data, Time: tm}, pending, nil
}

// apiPrefix is the subject prefix of the JetStream API that js talks to.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		if !strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix + "."
		}
		return o.APIPrefix
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return "$JS.API."
}
