package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// SpreadPartitionLeaders asks the leader of each replicated stream of partition k (its
// results and audit streams and its calls, runs and batches buckets) to step down in
// favour of the k-th of the stream's peers in name order, so that in a cluster the
// partitions' leaders — where their writes are sequenced and fsynced — are on different
// nodes rather than wherever the elections put them. It uses the server's leader stepdown
// with a preferred peer (nats-server 2.11+). It is best effort: a stream it cannot move is
// logged and left where it is (a later election may move any leader anyway), and it
// returns how many leaders it moved. With one replica or one partition it does nothing.
func SpreadPartitionLeaders(ctx context.Context, js jetstream.JetStream, names contracts.Names, log zerolog.Logger) int {
	if names.PartitionCount() < 2 {
		return 0
	}
	moved := 0
	for _, pn := range names.EachPartition() {
		k := pn.PartitionIndex()
		for _, stream := range []string{pn.ResultsStream(), pn.AuditStream(), pn.CallRecordsStream(),
			pn.RunRecordsStream(), contracts.RecordStream(pn.BatchesBucket())} {
			ok, err := preferLeader(ctx, js, stream, k)
			if err != nil {
				log.Warn().Err(err).Str("stream", stream).Int("partition", k).Msg("partition leader left where it is")
				continue
			}
			if ok {
				moved++
			}
		}
	}
	return moved
}

// preferLeader moves the leader of stream to its k-th peer in name order; false when the
// stream is not replicated or that peer leads it already.
func preferLeader(ctx context.Context, js jetstream.JetStream, stream string, k int) (bool, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false, err
	}
	cl := st.CachedInfo().Cluster
	if cl == nil || cl.Leader == "" || len(cl.Replicas) == 0 {
		return false, nil
	}
	peers := []string{cl.Leader}
	for _, r := range cl.Replicas {
		peers = append(peers, r.Name)
	}
	slices.Sort(peers)
	want := peers[k%len(peers)]
	if want == cl.Leader {
		return false, nil
	}
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	if err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg, err := js.Conn().RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return false, fmt.Errorf("bus: leader stepdown of %s to %s: %w", stream, want, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return false, fmt.Errorf("bus: leader stepdown of %s: %w", stream, err)
	}
	if !resp.Success {
		desc := "refused"
		if resp.Error != nil {
			desc = resp.Error.Description
		}
		return false, fmt.Errorf("bus: leader stepdown of %s to %s: %s", stream, want, desc)
	}
	return true, nil
}
