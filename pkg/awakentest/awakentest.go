// Package awakentest runs a whole awaken deployment in containers for integration tests:
// NATS JetStream (one server, or a 3-node cluster with every stream and bucket at 3
// replicas), the `awaken setup` step, the five pipeline services and the api (micro
// service, HTTP api, console), each as its own container on a private network, with the
// least-privilege NATS users of deploy/nats/auth.conf. It returns a ready platform
// [client.Client] and the api's base URL ([Deployment.APIURL]), and can stop, start and
// kill any service or NATS node for fault tests.
//
// It is built on testcontainers-go (core only) and needs a Docker engine, but no image
// registry: the images are built locally FROM scratch (by `make images`, or by
// [BuildImages] / [Run] from the awaken module when missing). Because the Ryuk reaper
// image cannot be pulled without a registry, the package disables Ryuk (by setting
// TESTCONTAINERS_RYUK_DISABLED=true) unless the environment enables it explicitly, so a
// test must call [Deployment.Terminate] (for example in t.Cleanup): nothing else removes
// the containers, their volumes and the network.
//
//	d, err := awakentest.Run(ctx, awakentest.Options{Cluster: true})
//	if err != nil { t.Fatal(err) }
//	t.Cleanup(func() { _ = d.Terminate(context.Background()) })
//	res, err := d.Client.SubmitAndWait(ctx, batch)
//
// Host-side ports are bound to 127.0.0.1 (a local engine) and stay the same when a NATS
// node restarts, so clients reconnect to it.
package awakentest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/nats-io/nats.go"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.yaml.in/yaml/v3"

	awclient "github.com/awaken-dev/awaken/pkg/client"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Service subcommands of the awaken image, in start order (later stages first, as
// `awaken dev` starts them).
const (
	Publisher   = contracts.ServicePublisher
	BrainExec   = contracts.ServiceBrainExec
	SandboxExec = contracts.ServiceSandboxExec
	Gate        = contracts.ServiceGate
	Batcher     = contracts.ServiceBatcher
	// API is the approval doors: the micro service "awaken", the HTTP api and the console.
	// It starts with the pipeline services and only reads records and publishes commands.
	API = contracts.ServiceAPI
)

// Log lines that mark a container ready. A service logs readyLine once its streams were
// found and its durable consumers are bound (its /readyz turns 200 at the same moment).
const (
	natsReadyLine    = "Server is ready"
	serviceReadyLine = `"message":"ready"`
)

// labelDeployment marks every container of one deployment.
const labelDeployment = "dev.awaken.awakentest.deployment"

// Options configures [Run]. The zero value runs one NATS server, one replica of each
// service and the example configuration baked into the awaken image.
type Options struct {
	// Cluster runs a 3-node JetStream cluster (nats-1, nats-2, nats-3) and creates every
	// stream and bucket with 3 replicas.
	Cluster bool
	// ConfigYAML is the host configuration every service loads (tools, policy,
	// executors); nil uses the example configuration of the image. Relative module paths
	// resolve as in the repository: ../bin/wasm/*.wasm are the example tools.
	ConfigYAML []byte
	// Images to run; zero fields mean [DefaultImages].
	Images Images
	// NoBuild makes Run fail when an image is missing instead of building it.
	NoBuild bool
	// BrainExecReplicas and SandboxExecReplicas scale the executors (default 1 each).
	BrainExecReplicas   int
	SandboxExecReplicas int
	// LogLevel of the services (AWAKEN_LOG_LEVEL; default "info").
	LogLevel string
	// Logs receives image build output; nil discards it.
	Logs io.Writer
	// StartTimeout bounds the start of each container (default 2 minutes).
	StartTimeout time.Duration
}

// Deployment is a running awaken deployment. Its methods are safe for concurrent use.
type Deployment struct {
	// NATSURL is the host-side URL of the NATS server, or the comma-separated URLs of the
	// three cluster nodes.
	NATSURL string
	// Client is a platform client (NATS user "platform") connected to NATSURL. Terminate
	// closes it.
	Client *awclient.Client
	// Passwords holds the generated password of every NATS user of
	// deploy/nats/auth.conf ([deploy.Users]).
	Passwords map[string]string
	// Cluster reports whether NATS runs as a 3-node cluster.
	Cluster bool

	id       string
	provider *testcontainers.DockerProvider
	net      *testcontainers.DockerNetwork
	bindIP   string
	dialHost string

	mu      sync.Mutex
	members []*member
}

// member is one container of the deployment.
type member struct {
	name      string // "nats", "nats-1", "gate", "brain-exec-2"
	role      string // "nats" or the service subcommand
	readyLine string
	c         *testcontainers.DockerContainer
	// image and opts started c; [Deployment.Replace] starts a fresh container from them.
	image   string
	timeout time.Duration
	opts    []testcontainers.ContainerCustomizer
}

// DisableRyuk sets TESTCONTAINERS_RYUK_DISABLED=true unless the variable is set, which
// [Run] and [BuildImages] do first. testcontainers reads its configuration once per
// process, so a test binary that calls testcontainers before awakentest should call this
// first (for example in TestMain).
func DisableRyuk() {
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// Run starts a deployment and returns it once every service is ready and the platform
// client is connected. On error everything it started is removed again.
func Run(ctx context.Context, o Options) (d *Deployment, err error) {
	DisableRyuk()
	o.Images = o.Images.withDefaults()
	o.BrainExecReplicas = max(o.BrainExecReplicas, 1)
	o.SandboxExecReplicas = max(o.SandboxExecReplicas, 1)
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("awakentest: docker: %w", err)
	}
	missing, err := missingImages(ctx, p, o.Images)
	if err != nil {
		p.Close()
		return nil, err
	}
	if len(missing) > 0 {
		if o.NoBuild {
			p.Close()
			return nil, fmt.Errorf("awakentest: images %v are missing (run `make images`)", missing)
		}
		if err := BuildImages(ctx, o.Images, "", o.Logs); err != nil {
			p.Close()
			return nil, err
		}
	}
	passwords, err := deploy.GeneratePasswords()
	if err != nil {
		p.Close()
		return nil, err
	}
	idb := make([]byte, 6)
	_, _ = rand.Read(idb)
	d = &Deployment{id: hex.EncodeToString(idb), provider: p, Passwords: passwords, Cluster: o.Cluster}
	d.bindIP, d.dialHost = hostAddress()
	defer func() {
		if err != nil {
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = errors.Join(err, d.Terminate(tctx))
			d = nil
		}
	}()
	if d.net, err = network.New(ctx, network.WithLabels(d.labels())); err != nil {
		return d, fmt.Errorf("awakentest: network: %w", err)
	}

	// NATS.
	nodes := []string{"nats"}
	conf := deploy.NATSSingleConfig
	if o.Cluster {
		nodes, conf = []string{"nats-1", "nats-2", "nats-3"}, deploy.NATSClusterConfig
	}
	// A configuration of several partitions needs the grants of each (the image holds
	// the one-partition auth.conf): the generated file replaces it in every node.
	var natsFiles []testcontainers.ContainerCustomizer
	if p := configuredPartitions(o.ConfigYAML); p > 1 {
		auth, aerr := deploy.PartitionedAuthConf(p)
		if aerr != nil {
			return d, aerr
		}
		natsFiles = append(natsFiles, testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			return testcontainers.WithFiles(testcontainers.ContainerFile{
				Reader: bytes.NewReader(auth), ContainerFilePath: "/etc/" + deploy.NATSAuthConfig, FileMode: 0o644})(req)
		}))
	}
	var internalURLs, hostURLs []string
	var starts []func() error
	for _, n := range nodes {
		port, perr := d.freePort()
		if perr != nil {
			return d, perr
		}
		internalURLs = append(internalURLs, "nats://"+n+":4222")
		hostURLs = append(hostURLs, "nats://"+net.JoinHostPort(d.dialHost, port))
		env := deploy.PasswordEnvironment(passwords)
		env["NATS_SERVER_NAME"] = n
		starts = append(starts, func() error {
			return d.start(ctx, n, "nats", natsReadyLine, o.Images.NATS, o.StartTimeout, append([]testcontainers.ContainerCustomizer{
				testcontainers.WithCmd("-c", "/etc/nats/"+strings.TrimPrefix(conf, "nats/")),
				testcontainers.WithEnv(env),
				d.publish("4222/tcp", port)}, natsFiles...)...)
		})
	}
	if err := parallel(starts); err != nil {
		return d, err
	}
	d.NATSURL = strings.Join(hostURLs, ",")
	natsURL := strings.Join(internalURLs, ",")

	// Setup: streams and buckets, as the admin user.
	var configFile []testcontainers.ContainerCustomizer
	serviceEnv := map[string]string{"NATS_URL": natsURL, "AWAKEN_ENSURE": "false", "AWAKEN_LOG_LEVEL": o.LogLevel}
	if o.ConfigYAML != nil {
		const path = "/opt/awaken/config/awaken.yaml"
		serviceEnv["AWAKEN_CONFIG"] = path
		// A reader per container: one shared reader is drained by the first container and
		// every later one gets an empty file.
		configFile = append(configFile, testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
			return testcontainers.WithFiles(testcontainers.ContainerFile{
				Reader: bytes.NewReader(o.ConfigYAML), ContainerFilePath: path, FileMode: 0o644})(req)
		}))
	}
	if err := d.setup(ctx, o, natsURL, configFile); err != nil {
		return d, err
	}

	// Services.
	type svc struct{ name, role string }
	var svcs []svc
	for _, role := range []string{Publisher, BrainExec, SandboxExec, Gate, Batcher, API} {
		n := 1
		switch role {
		case BrainExec:
			n = o.BrainExecReplicas
		case SandboxExec:
			n = o.SandboxExecReplicas
		}
		for i := 1; i <= n; i++ {
			name := role
			if role == BrainExec || role == SandboxExec {
				name = role + "-" + strconv.Itoa(i)
			}
			svcs = append(svcs, svc{name, role})
		}
	}
	starts = starts[:0]
	for _, s := range svcs {
		env := mergeEnv(serviceEnv, map[string]string{"NATS_USER": s.role, "NATS_PASSWORD": passwords[s.role]})
		opts := append([]testcontainers.ContainerCustomizer{
			testcontainers.WithCmd(s.role),
			testcontainers.WithEnv(env),
			d.publish("8080/tcp", "0"),
		}, configFile...)
		switch s.role {
		case SandboxExec:
			opts = append(opts, testcontainers.WithTmpfs(map[string]string{"/tmp": "rw,mode=1777"}))
		case API:
			// Bound to :8080 in the container, the api would answer any Host: name the one
			// tests dial (loopback names are always answered), as compose.yaml does.
			opts = append(opts, testcontainers.WithEnv(map[string]string{"AWAKEN_ALLOWED_HOSTS": d.dialHost}))
		}
		starts = append(starts, func() error {
			return d.start(ctx, s.name, s.role, serviceReadyLine, o.Images.Awaken, o.StartTimeout, opts...)
		})
	}
	if err := parallel(starts); err != nil {
		return d, err
	}

	// The platform client.
	nc, err := d.Connect(deploy.UserPlatform)
	if err != nil {
		return d, err
	}
	if d.Client, err = awclient.New(nc, awclient.WithSource("awakentest")); err != nil {
		nc.Close()
		return d, err
	}
	return d, nil
}

// configuredPartitions is storage.partitions of a host configuration (0 when it has none
// or is not YAML the services would load either).
func configuredPartitions(configYAML []byte) int {
	var c struct {
		Storage struct {
			Partitions int `yaml:"partitions"`
		} `yaml:"storage"`
	}
	if yaml.Unmarshal(configYAML, &c) != nil {
		return 0
	}
	return c.Storage.Partitions
}

// setup runs `awaken setup` once, as the admin user, and waits for it to exit 0.
func (d *Deployment) setup(ctx context.Context, o Options, natsURL string, configFile []testcontainers.ContainerCustomizer) error {
	args := []string{"setup", "--timeout", "90s"}
	if o.Cluster {
		args = append(args, "--replicas", "3")
	}
	env := map[string]string{"NATS_URL": natsURL, "NATS_USER": deploy.UserAdmin, "NATS_PASSWORD": d.Passwords[deploy.UserAdmin]}
	if o.ConfigYAML != nil {
		env["AWAKEN_CONFIG"] = "/opt/awaken/config/awaken.yaml"
	}
	opts := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithCmd(args...),
		testcontainers.WithEnv(env),
		testcontainers.WithLabels(d.labels()),
		network.WithNetwork([]string{"setup"}, d.net),
		testcontainers.WithWaitStrategy(wait.ForExit().WithExitTimeout(2 * time.Minute)),
		// testcontainers publishes the image's EXPOSEd port when none is given: keep it
		// on the loopback like every other port.
		d.publish("8080/tcp", "0"),
	}, configFile...)
	c, err := testcontainers.Run(ctx, o.Images.Awaken, opts...)
	if c != nil {
		defer func() { _ = c.Terminate(context.Background()) }()
	}
	if err != nil {
		return fmt.Errorf("awakentest: setup: %w", err)
	}
	st, err := c.State(ctx)
	if err != nil {
		return fmt.Errorf("awakentest: setup: %w", err)
	}
	if st.ExitCode != 0 {
		return fmt.Errorf("awakentest: `awaken setup` exited %d:\n%s", st.ExitCode, containerLogs(ctx, c))
	}
	return nil
}

// start runs one container on the deployment network and records it.
func (d *Deployment) start(ctx context.Context, name, role, readyLine, image string, timeout time.Duration, opts ...testcontainers.ContainerCustomizer) error {
	all := append([]testcontainers.ContainerCustomizer{
		network.WithNetwork([]string{name}, d.net),
		testcontainers.WithLabels(d.labels()),
		testcontainers.WithWaitStrategy(wait.ForLog(readyLine).WithStartupTimeout(timeout)),
	}, opts...)
	c, err := testcontainers.Run(ctx, image, all...)
	if c != nil {
		d.mu.Lock()
		d.members = append(d.members, &member{name: name, role: role, readyLine: readyLine, c: c,
			image: image, timeout: timeout, opts: opts})
		d.mu.Unlock()
	}
	if err != nil {
		logs := ""
		if c != nil {
			logs = "\n" + containerLogs(ctx, c)
		}
		return fmt.Errorf("awakentest: start %s: %w%s", name, err, logs)
	}
	return nil
}

// publish maps a container port to hostPort ("0" for any) on the deployment's host
// address only.
func (d *Deployment) publish(containerPort, hostPort string) testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		if err := testcontainers.WithExposedPorts(containerPort)(req); err != nil {
			return err
		}
		p, err := mobynet.ParsePort(containerPort)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(d.bindIP)
		if err != nil {
			return err
		}
		return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = mobynet.PortMap{p: {{HostIP: ip, HostPort: hostPort}}}
		})(req)
	}
}

// freePort returns a host port for a NATS node: a fixed one on a local engine, so a
// restarted node keeps its address; "0" (any) on a remote engine.
func (d *Deployment) freePort() (string, error) {
	if d.bindIP != "127.0.0.1" {
		return "0", nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("awakentest: free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// hostAddress returns the address host ports bind to and the host tests dial: the
// loopback of a local engine; the engine's host for a remote one (DOCKER_HOST tcp://...)
// or TESTCONTAINERS_HOST_OVERRIDE.
func hostAddress() (bindIP, dialHost string) {
	if h := os.Getenv("TESTCONTAINERS_HOST_OVERRIDE"); h != "" {
		return "0.0.0.0", h
	}
	if u, err := url.Parse(os.Getenv("DOCKER_HOST")); err == nil && (u.Scheme == "tcp" || u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" {
		return "0.0.0.0", u.Hostname()
	}
	return "127.0.0.1", "127.0.0.1"
}

func (d *Deployment) labels() map[string]string { return map[string]string{labelDeployment: d.id} }

// Terminate closes the client and removes every container (with its volumes) and the
// network. It is safe to call more than once.
func (d *Deployment) Terminate(ctx context.Context) error {
	var errs []error
	if d.Client != nil {
		if err := d.Client.Close(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
		d.Client = nil
	}
	d.mu.Lock()
	members := d.members
	d.members = nil
	d.mu.Unlock()
	// One at a time, services before NATS: concurrent stops and removals of many
	// containers have wedged a Docker 20.10 engine (fuse-overlayfs) on the test machine.
	for i := len(members) - 1; i >= 0; i-- {
		m := members[i]
		if err := m.c.Terminate(ctx, testcontainers.StopTimeout(5*time.Second)); err != nil {
			errs = append(errs, fmt.Errorf("terminate %s: %w", m.name, err))
		}
	}
	if d.net != nil {
		if err := d.net.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove network: %w", err))
		}
		d.net = nil
	}
	if d.provider != nil {
		_ = d.provider.Close()
		d.provider = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("awakentest: terminate: %w", errors.Join(errs...))
	}
	return nil
}

// containerLogs reads the whole log of c ("" when it cannot be read).
func containerLogs(ctx context.Context, c testcontainers.Container) string {
	r, err := c.Logs(ctx)
	if err != nil {
		return ""
	}
	defer r.Close()
	var b strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

// parallel runs fns concurrently and joins their errors.
func parallel(fns []func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// mergeEnv merges ms into a new map; later keys win.
func mergeEnv(ms ...map[string]string) map[string]string {
	out := make(map[string]string)
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// pause waits for d or until ctx ends (polling pace of the fault helpers).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
