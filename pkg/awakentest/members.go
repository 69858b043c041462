package awakentest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/testcontainers/testcontainers-go"

	"github.com/awaken-dev/awaken/deploy"
)

// What a test does to a running deployment: connect as a user, find, stop, kill, start,
// replace, pause, cut off and reconnect its containers, read their logs and addresses.

// Connect opens a NATS connection from the host as user (one of [deploy.Users]), with
// endless reconnects. A service user gets its service's inbox prefix, as the services
// use, since deploy/nats/auth.conf lets it subscribe to nothing else. The caller closes it.
func (d *Deployment) Connect(user string, opts ...nats.Option) (*nats.Conn, error) {
	pw, ok := d.Passwords[user]
	if !ok {
		return nil, fmt.Errorf("awakentest: unknown NATS user %q", user)
	}
	all := []nats.Option{nats.Name("awakentest-" + user), nats.UserInfo(user, pw),
		nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	if slices.Contains(deploy.ServiceUsers(), user) {
		all = append(all, nats.CustomInboxPrefix(deploy.ServiceInboxPrefix(user)))
	}
	nc, err := nats.Connect(d.NATSURL, append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("awakentest: connect as %s: %w", user, err)
	}
	return nc, nil
}

// Services returns the names of the service containers: "publisher", "gate", "batcher",
// "api", and "brain-exec-N" / "sandbox-exec-N" for the executor replicas.
func (d *Deployment) Services() []string {
	return d.names(func(m *member) bool { return m.role != "nats" })
}

// Nodes returns the names of the NATS containers: "nats", or "nats-1".."nats-3", which
// are also their server names.
func (d *Deployment) Nodes() []string {
	return d.names(func(m *member) bool { return m.role == "nats" })
}

func (d *Deployment) names(keep func(*member) bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, m := range d.members {
		if keep(m) {
			out = append(out, m.name)
		}
	}
	return out
}

func (d *Deployment) member(name string) (*member, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.members {
		if m.name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("awakentest: no container %q", name)
}

// onMember runs act on the service or node called name; a failure of act is reported as
// "awakentest: <verb> <name>: …".
func (d *Deployment) onMember(name, verb string, act func(*member) error) error {
	m, err := d.member(name)
	if err != nil {
		return err
	}
	if err := act(m); err != nil {
		return fmt.Errorf("awakentest: %s %s: %w", verb, name, err)
	}
	return nil
}

// Container returns the container of a service or node, for what this package does not
// offer (exec, copy, inspect).
func (d *Deployment) Container(name string) (testcontainers.Container, error) {
	m, err := d.member(name)
	if err != nil {
		return nil, err
	}
	return m.c, nil
}

// Stop stops a service or node gracefully: SIGTERM, and SIGKILL after timeout. A service
// drains (finishes its in-flight messages); a NATS node leaves the cluster cleanly.
func (d *Deployment) Stop(ctx context.Context, name string, timeout time.Duration) error {
	return d.onMember(name, "stop", func(m *member) error { return m.c.Stop(ctx, &timeout) })
}

// Kill kills a service or node with SIGKILL, as a crash would: in-flight messages stay
// unacknowledged and are redelivered after their ack wait.
func (d *Deployment) Kill(ctx context.Context, name string) error {
	return d.onMember(name, "kill", func(m *member) error {
		if _, err := d.provider.Client().ContainerKill(ctx, m.c.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			return err
		}
		// Wait until the engine reports it stopped, so a Start right after is a real restart.
		for {
			st, err := m.c.State(ctx)
			if err != nil {
				return err
			}
			if !st.Running {
				return nil
			}
			if err := pause(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	})
}

// Start starts a stopped or killed service or node again and waits until it is ready
// anew (a new ready line in its log). A NATS node keeps its data volume and host port.
func (d *Deployment) Start(ctx context.Context, name string) error {
	m, err := d.member(name)
	if err != nil {
		return err
	}
	before := strings.Count(containerLogs(ctx, m.c), m.readyLine)
	if err := m.c.Start(ctx); err != nil {
		return fmt.Errorf("awakentest: start %s: %w", name, err)
	}
	for {
		logs := containerLogs(ctx, m.c)
		if strings.Count(logs, m.readyLine) > before {
			return nil
		}
		if st, err := m.c.State(ctx); err == nil && !st.Running && st.Status == "exited" {
			return fmt.Errorf("awakentest: %s exited %d after restart:\n%s", name, st.ExitCode, logs)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("awakentest: %s not ready after restart: %w", name, err)
		}
	}
}

// Replace removes a service or node with its volumes and starts a fresh container from
// the same image and options, under the same name, network alias and host port, and waits
// until it is ready. For a NATS node this is a restart with its data directory wiped: it
// rejoins the cluster empty and must catch up from the other nodes.
func (d *Deployment) Replace(ctx context.Context, name string) error {
	m, err := d.member(name)
	if err != nil {
		return err
	}
	if err := m.c.Terminate(ctx, testcontainers.StopTimeout(5*time.Second)); err != nil {
		return fmt.Errorf("awakentest: replace %s: %w", name, err)
	}
	d.mu.Lock()
	d.members = slices.DeleteFunc(d.members, func(o *member) bool { return o == m })
	d.mu.Unlock()
	return d.start(ctx, m.name, m.role, m.readyLine, m.image, m.timeout, m.opts...)
}

// Pause freezes every process of a service or node (docker pause): it keeps its
// connections but answers nothing until [Deployment.Unpause].
func (d *Deployment) Pause(ctx context.Context, name string) error {
	return d.onMember(name, "pause", func(m *member) error {
		_, err := d.provider.Client().ContainerPause(ctx, m.c.GetContainerID(), client.ContainerPauseOptions{})
		return err
	})
}

// Unpause resumes a container frozen by [Deployment.Pause].
func (d *Deployment) Unpause(ctx context.Context, name string) error {
	return d.onMember(name, "unpause", func(m *member) error {
		_, err := d.provider.Client().ContainerUnpause(ctx, m.c.GetContainerID(), client.ContainerUnpauseOptions{})
		return err
	})
}

// Disconnect removes a service or node from the deployment's network: a partition that
// cuts it from every other container (and from its published host ports) while it keeps
// running. [Deployment.Reconnect] heals it.
func (d *Deployment) Disconnect(ctx context.Context, name string) error {
	return d.onMember(name, "disconnect", func(m *member) error {
		_, err := d.provider.Client().NetworkDisconnect(ctx, d.net.ID, client.NetworkDisconnectOptions{
			Container: m.c.GetContainerID(), Force: true})
		return err
	})
}

// Reconnect attaches a container cut off by [Deployment.Disconnect] to the deployment's
// network again, under its name as network alias (the other containers dial it by name).
func (d *Deployment) Reconnect(ctx context.Context, name string) error {
	return d.onMember(name, "reconnect", func(m *member) error {
		_, err := d.provider.Client().NetworkConnect(ctx, d.net.ID, client.NetworkConnectOptions{
			Container: m.c.GetContainerID(), EndpointConfig: &mobynet.EndpointSettings{Aliases: []string{name}}})
		return err
	})
}

// Logs returns the whole log (stdout and stderr) of a service or node.
func (d *Deployment) Logs(ctx context.Context, name string) (string, error) {
	m, err := d.member(name)
	if err != nil {
		return "", err
	}
	return containerLogs(ctx, m.c), nil
}

// ReadyURL returns the host-side /readyz URL of a service (its health listener on
// container port 8080).
func (d *Deployment) ReadyURL(ctx context.Context, name string) (string, error) {
	m, err := d.member(name)
	if err != nil {
		return "", err
	}
	if m.role == "nats" {
		return "", fmt.Errorf("awakentest: %s is a NATS node", name)
	}
	return d.httpURL(ctx, m, "/readyz")
}

// APIURL returns the host-side base URL of the api's HTTP api and console
// ("http://HOST:PORT/"; the routes are /v1/..., see services/api).
func (d *Deployment) APIURL(ctx context.Context) (string, error) {
	m, err := d.member(API)
	if err != nil {
		return "", err
	}
	return d.httpURL(ctx, m, "/")
}

// httpURL is the host-side URL of path on m's HTTP listener (container port 8080: a
// service's health listener, the api's HTTP api and console).
func (d *Deployment) httpURL(ctx context.Context, m *member, path string) (string, error) {
	p, err := m.c.MappedPort(ctx, "8080/tcp")
	if err != nil {
		return "", fmt.Errorf("awakentest: %s: %w", m.name, err)
	}
	return "http://" + net.JoinHostPort(d.dialHost, strconv.Itoa(int(p.Num()))) + path, nil
}
