package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/servicerun"
)

// clusterNodes is the size of the cluster rows' JetStream cluster, and the replicas of
// their streams and buckets.
const clusterNodes = 3

// clusterReadyTimeout bounds the wait for the cluster's meta leader (about 1 s idle) and
// for the leaders of the streams a row creates.
const clusterReadyTimeout = 60 * time.Second

// backend is the JetStream a NATS row runs on: one embedded server (its streams and
// buckets R1, reached through the in-process pipe, as `awaken dev` runs), or, for the
// cluster rows, three embedded servers clustered over the loopback (R3, reached over TCP
// through the comma-joined client URLs of all three, as a deployment's services are).
type backend struct {
	nodes    []*server.Server
	replicas int
	// dial opens a new connection for one service or client.
	dial func(name string) (*nats.Conn, error)
	// url is the client URL list of the cluster ("" for the single server).
	url  string
	dirs []string
	stop func()
}

// newBackend starts the row's server(s) at durability level lvl, named after the row's
// kind (with "-cluster" appended on the cluster).
func newBackend(kind string, lvl level, cluster bool) (*backend, error) {
	name := kind
	if cluster {
		name += "-cluster"
	}
	if !cluster {
		srv, stop, err := embedded(name, lvl)
		if err != nil {
			return nil, err
		}
		return &backend{nodes: []*server.Server{srv}, replicas: 1, dial: servicerun.InProcessDialer(srv), stop: stop}, nil
	}
	// A cluster port taken between freePorts and the node's start (another process on
	// this machine) fails the start; a fresh set of ports cures it.
	var err error
	for range 3 {
		var b *backend
		if b, err = startCluster(name, lvl); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// startCluster starts clusterNodes embedded servers, each with its own temporary store
// directory, its client port chosen by the server and its cluster port chosen free on
// 127.0.0.1, every node routed to every other, all with the options of `awaken dev` at
// level lvl (synced: sync always on every node, as the containers' cluster.conf). It
// returns once the cluster has elected its meta leader.
func startCluster(name string, lvl level) (*backend, error) {
	sync := natsserver.SyncLazy
	if lvl == levelSynced {
		sync = natsserver.SyncAlways
	}
	ports, err := freePorts(clusterNodes)
	if err != nil {
		return nil, err
	}
	routes := make([]string, len(ports))
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	b := &backend{replicas: clusterNodes}
	b.stop = func() {
		for _, s := range b.nodes {
			natsserver.Shutdown(s)
		}
		for _, d := range b.dirs {
			_ = os.RemoveAll(d)
		}
	}
	for i, port := range ports {
		dir, err := os.MkdirTemp("", fmt.Sprintf("awaken-bench-%s-n%d-", name, i+1))
		if err != nil {
			b.stop()
			return nil, err
		}
		b.dirs = append(b.dirs, dir)
		srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{
			StoreDir: dir, Port: -1, ServerName: fmt.Sprintf("bench-%s-n%d", name, i+1), NoLog: true, Sync: sync,
			Customize: func(o *server.Options) error {
				o.Cluster = server.ClusterOpts{Name: "awaken-bench-" + name, Host: "127.0.0.1", Port: port}
				o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
				return nil
			},
		})
		if err != nil {
			b.stop()
			return nil, err
		}
		b.nodes = append(b.nodes, srv)
		// With NoLog a failed route listener is silent: the node would run alone.
		if srv.ClusterAddr() == nil {
			b.stop()
			return nil, fmt.Errorf("cluster node %d: not listening on cluster port %d", i+1, port)
		}
	}
	urls := make([]string, len(b.nodes))
	for i, s := range b.nodes {
		urls[i] = s.ClientURL()
	}
	b.url = strings.Join(urls, ",")
	b.dial = servicerun.URLDialer(b.url)
	if err := b.waitMetaLeader(); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// waitMetaLeader waits until the cluster answers a JetStream account request, which
// needs an elected meta leader.
func (b *backend) waitMetaLeader() error {
	nc, err := nats.Connect(b.url, nats.Name("bench-cluster-probe"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		acancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no JetStream meta leader within %s: %w", clusterReadyTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitStreamLeaders waits until each named stream reports a leader: a write to an R3
// stream created a moment ago can otherwise time out while its Raft group elects one.
func waitStreamLeaders(ctx context.Context, js jetstream.JetStream, streams ...string) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	for _, name := range streams {
		for {
			s, err := js.Stream(ctx, name)
			if err == nil {
				info, ierr := s.Info(ctx)
				if ierr == nil && (info.Cluster == nil || info.Cluster.Leader != "") {
					break
				}
				err = errors.Join(err, ierr)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("stream %s: no leader within %s: %w", name, clusterReadyTimeout, errors.Join(err, ctx.Err()))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// waitAllStreamLeaders waits for the leader of every stream of the account (the buckets'
// streams included).
func waitAllStreamLeaders(ctx context.Context, js jetstream.JetStream) error {
	lister := js.StreamNames(ctx)
	var names []string
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil {
		return err
	}
	return waitStreamLeaders(ctx, js, names...)
}

// freePorts returns n TCP ports that were free on 127.0.0.1 a moment ago, all held open
// together so they differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
