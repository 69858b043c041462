// Package cli implements the awaken command line: the service subcommands, `dev`, and the
// client commands a person uses against a running deployment.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/awaken-dev/awaken/internal/bus"
	"io"
	"os"
	"os/user"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/internal/brainexec/builtin"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/devstack"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

var usage = `awaken — durable execution of AI-agent tool calls on NATS JetStream

Services:
  awaken dev            all five services on an embedded JetStream server
  awaken batcher        persist submitted batches, dispatch calls in model order
  awaken gate           permission gate, approval tickets, schedules, cancellation
  awaken brain-exec     run brain tools (in-process Go tools, MCP servers)
  awaken sandbox-exec   run sandbox tools (WebAssembly)
  awaken publisher      publication barrier: ordered, atomic results
  awaken api            HTTP api (batches, approvals), web console, NATS micro service "awaken"
  awaken setup          create or update the streams and buckets (as the NATS admin user)

Operations:
  awaken healthcheck URL               exit 0 iff GET URL answers 200 (container health checks)
  awaken nats-auth [--partitions N]    print deploy/nats/auth.conf granting every partition (storage.partitions)

Client:
  awaken submit FILE [--wait]          submit a batch (JSON), optionally wait for its results
  awaken tickets ls                    list open approval tickets
  awaken tickets show CORRELATION_ID   show one ticket
  awaken tickets approve CORRELATION_ID [--note TEXT] [--arguments JSON] [--digest D] [--as NAME]
  awaken tickets deny CORRELATION_ID [--reason TEXT] [--as NAME]
  awaken runs cancel RUN_ID            end a run (its open batch sealed); returns once it ended
  awaken calls cancel OPERATION_ID [--reason TEXT] [--as NAME]
                                       cancel one call: before start, or its body stopped;
                                       returns once the call ended (and says how)
  awaken calls resolve OPERATION_ID --ran (--text T | --output FILE) | --not-run [--note N] [--as NAME]
                                       resolve an indeterminate call: into its batch's results,
                                       or as a correction once they are published
  awaken batch show BATCH_ID [--json]  per-call phase, outcome and timeline of a batch
  awaken batch watch BATCH_ID          call state changes and tool progress, live, until published
  awaken counter NAME                  read the example counter tool's durable count
  awaken tools ls [--format F]         the tool catalog with schemas (F: ` + strings.Join(contracts.CatalogFormats(), ", ") + `)
  awaken tools pause ID [--reason R]   pause a tool: its new calls are blocked (kill switch)
  awaken tools resume ID               lift the pause of a tool
  awaken policy test --config NEW.yaml [--since T] [--until T] [--run R]...
                                       replay the audited gate decisions through a new host
                                       policy: old -> new per call, counts per rule (writes nothing)
  awaken audit verify [--run R | --since T --until T | --from-seq N --to-seq M | --file F] [--public-key HEX]
                                       check the audit trail's hash chains and signatures, a
                                       pruned chain from its signed checkpoint; exits 1
                                       naming the first broken record
  awaken audit export --run R --format jsonl [--out FILE]
                                       the trail with what a verifier needs, from the
                                       checkpoint it starts at (verify --file)
  awaken audit keygen --out FILE       a new Ed25519 signing key (audit.signing_key_file)
  awaken audit key                     the public key of the configured signing key
  awaken mcp-serve [--actor NAME]      an MCP server on stdio: each tools/call a batch of this awaken

Output: the client commands print tables and short lines to a terminal and JSON to
anything else (a pipe, a file); --json forces JSON, --json=false the table.

Logs: dev --log-level LEVEL (trace, debug, info, warn, error; env AWAKEN_LOG_LEVEL, which
the service subcommands read too) and --log-format auto|console|json (env
AWAKEN_LOG_FORMAT; auto: the console format on a terminal, JSON lines otherwise).
Stopping: the first SIGINT/SIGTERM drains (the log says which calls it waits for, at most
30s); a second stops at once, as a crash would (a never-replay call then running ends
indeterminate). dev locks its --data directory (DATA/awaken.lock).

Common flags: --config FILE (env AWAKEN_CONFIG), --nats-url URL (env NATS_URL),
--prefix PREFIX (client commands; env AWAKEN_PREFIX), NATS credentials --nats-user /
--nats-password (env NATS_USER, NATS_PASSWORD) or --nats-creds FILE (env NATS_CREDS).
Services: --http ADDR (env AWAKEN_HTTP): /metrics, /healthz and /readyz.
Services and api: --ensure=false (env AWAKEN_ENSURE=false) waits for ` + "`awaken setup`" + ` to have
created the streams and buckets (least-privilege NATS users may not); each connects with
its own reply-inbox prefix _INBOX_<service>, as deploy/nats/auth.conf requires.
dev and api: --http HOST:PORT (env AWAKEN_HTTP, default 127.0.0.1:8080; "" disables HTTP):
the api, the console, /metrics, /healthz and /readyz; --api-token TOKEN (env AWAKEN_API_TOKEN;
prefer the environment variable, flags show in ps) guards /v1 and /metrics (--metrics-public,
env AWAKEN_METRICS_PUBLIC=true, serves /metrics without it); the probes stay open.
--api-tokens FILE (env AWAKEN_API_TOKENS) adds named tokens, one "NAME TOKEN [ROLES]" per
line: a ticket resolved over HTTP records the name of its token as who decided ("api-token"
for --api-token); ROLES (comma-separated: viewer, approver, operator, submitter) limits the
token's routes (403 missing_role), and a line without them has every role. The api refuses to start on a tokens file with no token, a token under 16
bytes, a reserved name (timer, anonymous, api-token, nats…, claimed…) or a mode other users
may read (chmod 600). tickets approve|deny record --as NAME (env AWAKEN_ACTOR; default cli:OS_USER)
as a claimed actor ("NAME (claimed)": no door authenticated it; a reserved name is refused
reserved_actor); approve over the api to be recorded by your token's name.
Run "awaken CMD -h" for a command's flags.
`

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mainIO(ctx, args, cmdIO{stdin: os.Stdin, stdout: stdout, stderr: stderr})
}

// errUnknownCommand is the error of a first word that names no command.
var errUnknownCommand = errors.New("unknown command")

func mainIO(ctx context.Context, args []string, io cmdIO) int {
	if len(args) > 0 && args[0] == "help" && len(args) > 1 {
		args = append(args[1:], "-h") // awaken help CMD…: the help of CMD
	}
	if len(args) == 0 || args[0] == "help" || isHelpFlag(args[0]) {
		fmt.Fprint(io.stdout, usage)
		return 0
	}
	err := dispatch(ctx, args, io)
	if errors.Is(err, errUnknownCommand) {
		fmt.Fprintf(io.stderr, "awaken: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(io.stderr, "awaken %s: %v\n", args[0], err)
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func defaultConfigPath() string { return env("AWAKEN_CONFIG", "examples/awaken.yaml") }
func defaultNATSURL() string    { return env("NATS_URL", "nats://127.0.0.1:4222") }

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("awaken "+name, flag.ContinueOnError)
	return fs
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return invoke(ctx, "dev", devCommand, args, cmdIO{stdout: stdout, stderr: stderr})
}

func devCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	data := fs.String("data", env("AWAKEN_DATA", ".awaken/data"), "JetStream data directory")
	listen := fs.String("listen", env("AWAKEN_LISTEN", "127.0.0.1:4222"), "address outside clients and the nats CLI connect to")
	httpAddr, token, tokens, publicMetrics := apiFlags(fs)
	syncLevel := fs.String("sync", env("AWAKEN_SYNC", string(devstack.DefaultDevSync)), "embedded JetStream durability: always (fsync every write: survives power loss) or lazy (survives a process crash only; env AWAKEN_SYNC)")
	secure := fs.Bool("secure", envBool("AWAKEN_SECURE"), "least-privilege NATS users of deploy/nats/auth.conf (passwords from AWAKEN_NATS_PASSWORD_<USER>, generated when unset)")
	logger := logFlags(fs, stderr)
	return func(ctx context.Context, _ []string) error {
		log, err := logger()
		if err != nil {
			return err
		}
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		contracts.SetNewFormats(cfg.WritesNewFormats())
		named, roles, err := tokens()
		if err != nil {
			return err
		}
		sync, err := natsserver.ParseSync(*syncLevel)
		if err != nil {
			return fmt.Errorf("dev --sync: %w", err)
		}
		if err := devAuditKey(cfg, *data); err != nil {
			return err
		}
		app.LimitDevMemory()
		if addr := os.Getenv("AWAKEN_PPROF"); addr != "" {
			if _, err := servePprof(addr, log); err != nil {
				return err
			}
		}
		o := devstack.DevOptions{Config: cfg, Log: &log, StopNow: stopNow(ctx), DataDir: *data, Listen: *listen, HTTP: *httpAddr, APIToken: *token, APITokens: named, APITokenRoles: roles, PublicMetrics: *publicMetrics, Secure: *secure, Sync: sync}
		if *secure {
			if o.Passwords, err = devPasswords(); err != nil {
				return err
			}
		}
		o.ReadyURLs = func(url, console string) {
			if console == "" {
				console = "off"
			}
			extra := ""
			if *secure {
				extra = fmt.Sprintf(", secure: connect as NATS_USER=%s NATS_PASSWORD=%s", deploy.UserPlatform, o.Passwords[deploy.UserPlatform])
			}
			fmt.Fprintf(stdout, "awaken dev ready: %s, console %s (config %s, data %s, sync %s%s)\n", url, console, cfg.Source, *data, sync, extra)
		}
		return devstack.Dev(ctx, o)
	}
}

// serviceFlags are the flags every pipeline service subcommand takes.
type serviceFlags struct {
	cfgPath, url, opsAddr string
	authOpts              []nats.Option
	ensure                bool
}

// declareServiceFlags declares the flags of a service subcommand on fs and returns how to
// read them once parsed.
func declareServiceFlags(fs *flag.FlagSet) func() (serviceFlags, error) {
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	auth := natsAuthFlags(fs)
	opsAddr := fs.String("http", env("AWAKEN_HTTP", ""), `address of the operations listener: /metrics, /healthz, /readyz ("" disables it; env AWAKEN_HTTP)`)
	ensure := ensureFlag(fs)
	return func() (serviceFlags, error) {
		authOpts, err := auth()
		if err != nil {
			return serviceFlags{}, err
		}
		return serviceFlags{cfgPath: *cfgPath, url: *url, opsAddr: *opsAddr, authOpts: authOpts, ensure: *ensure}, nil
	}
}

// serviceCommand is the pipeline service subcommand name (batcher, gate, sandbox-exec,
// publisher).
func serviceCommand(name string, fs *flag.FlagSet, io cmdIO) runner {
	flags := declareServiceFlags(fs)
	return func(ctx context.Context, _ []string) error {
		return runService(ctx, name, flags, io.stderr)
	}
}

func runService(ctx context.Context, name string, flags func() (serviceFlags, error), stderr io.Writer) error {
	f, err := flags()
	if err != nil {
		return err
	}
	cfg, err := config.Load(f.cfgPath)
	if err != nil {
		return err
	}
	contracts.SetNewFormats(cfg.WritesNewFormats())
	log := servicerun.NewLogger(stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
	tp, shutdownTracing, err := telemetry.TracerProviderFromEnv(ctx, "awaken-"+name, nil)
	if err != nil {
		return err
	}
	defer flushTraces(shutdownTracing, log)
	st, err := app.Start(ctx, app.Options{
		Config: cfg, Services: []string{name}, Dial: servicerun.ServiceDialer(f.url, f.authOpts...), Log: log,
		NoEnsure: !f.ensure, TracerProvider: tp, HTTPAddr: f.opsAddr,
	})
	if err != nil {
		return err
	}
	log.Info().Str("service", name).Str("nats_url", f.url).Msg("ready")
	<-ctx.Done()
	return servicerun.StopGracefully(st.Stack, log.With().Str("service", name).Logger(), servicerun.DefaultStopTimeout, stopNow(ctx))
}

// ensureFlag declares --ensure, shared by the service subcommands and api.
func ensureFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("ensure", !envFalse("AWAKEN_ENSURE"), "create or update the streams and buckets at start; false waits for `awaken setup` to have done it (least-privilege users)")
}

// apiFlags declares --http, --api-token, --api-tokens and --metrics-public, shared by dev
// and api. tokens reads the --api-tokens file once the flags are parsed.
func apiFlags(fs *flag.FlagSet) (httpAddr, token *string, tokens func() (map[string]string, map[string]apitokens.RoleSet, error), publicMetrics *bool) {
	httpAddr = fs.String("http", env("AWAKEN_HTTP", "127.0.0.1:8080"), `address of the HTTP api and web console ("" disables them)`)
	token = fs.String("api-token", os.Getenv("AWAKEN_API_TOKEN"), "bearer token the HTTP api requires, recorded as \"api-token\" when it resolves a ticket (default: none; env AWAKEN_API_TOKEN)")
	tokensFile := fs.String("api-tokens", os.Getenv("AWAKEN_API_TOKENS"), "file of named bearer tokens, one \"NAME TOKEN [ROLE,…]\" per line (roles viewer, approver, operator, submitter; none given: all): each resolution records the name of its token (env AWAKEN_API_TOKENS)")
	publicMetrics = fs.Bool("metrics-public", envBool("AWAKEN_METRICS_PUBLIC"), "serve /metrics without the api token (for a scraper that cannot send one)")
	tokens = func() (map[string]string, map[string]apitokens.RoleSet, error) {
		if *tokensFile == "" {
			return nil, nil, nil
		}
		return apitokens.Load(*tokensFile)
	}
	return httpAddr, token, tokens, publicMetrics
}

// runAPI runs the api alone against a NATS server: the micro service "awaken", the HTTP api
// and the console.
func apiCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	auth := natsAuthFlags(fs)
	ensure := ensureFlag(fs)
	httpAddr, token, tokens, publicMetrics := apiFlags(fs)
	hosts := fs.String("allowed-hosts", env("AWAKEN_ALLOWED_HOSTS", ""), "comma-separated Host names the HTTP api answers besides loopback names (\"*\" for any)")
	return func(ctx context.Context, _ []string) error {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		contracts.SetNewFormats(cfg.WritesNewFormats())
		authOpts, err := auth()
		if err != nil {
			return err
		}
		named, roles, err := tokens()
		if err != nil {
			return err
		}
		var allowed []string
		for _, h := range strings.Split(*hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				allowed = append(allowed, h)
			}
		}
		log := servicerun.NewLogger(stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
		tp, shutdownTracing, err := telemetry.TracerProviderFromEnv(ctx, "awaken-api", nil)
		if err != nil {
			return err
		}
		defer flushTraces(shutdownTracing, log)
		st, err := app.Start(ctx, app.Options{
			// ServiceDialer: the api connects with its own inbox prefix, the only one the api
			// user of deploy/nats/auth.conf may subscribe to.
			Config: cfg, Services: []string{contracts.ServiceAPI}, Dial: servicerun.ServiceDialer(*url, authOpts...), Log: log,
			API:            api.Options{HTTPAddr: *httpAddr, Token: *token, Tokens: named, TokenRoles: roles, AllowedHosts: allowed, PublicMetrics: *publicMetrics},
			TracerProvider: tp, NoEnsure: !*ensure,
		})
		if err != nil {
			return err
		}
		console := st.APIService.URL()
		if console == "" {
			console = "off"
		}
		// The same log line as the other services: container tests and log shippers wait for it.
		log.Info().Str("service", contracts.ServiceAPI).Str("nats_url", *url).Str("console", console).Msg("ready")
		fmt.Fprintf(stdout, "awaken api ready: micro service %q on %s, console %s\n", api.MicroName, *url, console)
		<-ctx.Done()
		return servicerun.StopGracefully(st.Stack, log.With().Str("service", contracts.ServiceAPI).Logger(), servicerun.DefaultStopTimeout, stopNow(ctx))
	}
}

// batchShowCommand implements `awaken batch show BATCH_ID`: the batch's calls with their
// phase and outcome, then every committed stage of every call, read from the records.
func batchShowCommand(fs *flag.FlagSet, io cmdIO) runner {
	connect := dialClient(fs)
	asJSON := jsonFlag(fs, io.stdout)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{"usage: awaken batch show BATCH_ID [--json]"}
		}
		batchID := args[0]
		if _, _, err := contracts.ParseBatchID(batchID); err != nil {
			return &usageError{fmt.Sprintf("%v (a batch id looks like tool-batch:RUN_ID:STEP)", err)}
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		r, err := readmodel.OpenReader(ctx, c.js, c.Names())
		if err != nil {
			return err
		}
		b, err := r.Batch(ctx, batchID)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(io.stdout, b)
		}
		return readmodel.WriteTimeline(io.stdout, b)
	}
}

// flushTraces flushes the spans still buffered by the tracer provider, bounded.
func flushTraces(shutdown func(context.Context) error, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("flushing traces failed")
	}
}

// session is a command's connection to a deployment: the awaken client, and the JetStream
// context of its connection for what a command reads that the client does not offer (the
// records, the audit stream, the counters bucket).
type session struct {
	*client.Client
	js jetstream.JetStream
	// names are the deployment's: its recorded partition count, not a flag's.
	names contracts.Names
}

// Names returns the deployment's names, with the partition count `awaken setup`
// recorded.
func (s *session) Names() contracts.Names { return s.names }

// connectFunc opens a command's session, a context bounded by --timeout that starts once
// connected, and done, which cancels that context and closes the client.
type connectFunc func(ctx context.Context) (c *session, bounded context.Context, done func(), err error)

// dialClient registers the connection flags every command shares (--nats-url, --prefix,
// --timeout and the NATS credentials) and returns how to connect with them once parsed.
func dialClient(fs *flag.FlagSet) connectFunc {
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	prefix := fs.String("prefix", env("AWAKEN_PREFIX", contracts.DefaultPrefix), "subject prefix of the deployment")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait")
	auth := natsAuthFlags(fs)
	return func(ctx context.Context) (*session, context.Context, func(), error) {
		authOpts, err := auth()
		if err != nil {
			return nil, nil, nil, err
		}
		nc, err := nats.Connect(*url, append([]nats.Option{nats.Name("awaken-cli"), nats.MaxReconnects(-1)}, authOpts...)...)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connect %s: %w", *url, err)
		}
		c, err := client.New(nc, client.WithPrefix(*prefix), client.WithSource("awaken/cli"))
		if err != nil {
			nc.Close()
			return nil, nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, nil, err
		}
		bounded, cancel := context.WithTimeout(ctx, *timeout)
		names, err := bus.DeploymentNames(bounded, js, contracts.NewNames(c.Prefix()))
		if err != nil {
			cancel()
			nc.Close()
			return nil, nil, nil, err
		}
		return &session{Client: c, js: js, names: names}, bounded, func() {
			cancel()
			c.Close() // Close drains nc
		}, nil
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func submitCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	connect := dialClient(fs)
	wait := fs.Bool("wait", false, "wait for the ordered results and print them")
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, _ []string) error {
		if fs.NArg() != 1 {
			return &usageError{"usage: awaken submit FILE [--wait]"}
		}
		data, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return err
		}
		var sub contracts.BatchSubmission
		if err := json.Unmarshal(data, &sub); err != nil {
			return batchFileError(fs.Arg(0), data, err)
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		if !*wait {
			id, err := c.Submit(ctx, sub)
			if err != nil {
				return err
			}
			return renderSubmitted(stdout, fs.Arg(0), id, *asJSON)
		}
		renderWaiting(stderr, sub.BatchID())
		stopNotes := announceTickets(ctx, c, sub.RunID, sub.Step, stderr)
		res, err := c.SubmitAndWait(ctx, sub)
		stopNotes()
		if err != nil {
			return err
		}
		return renderResults(stdout, submitResult{res.BatchID, res.Results, res.Finalized}, *asJSON)
	}
}

// ticketsCommand is `awaken tickets sub`: ls, show, approve or deny.
func ticketsCommand(sub string) func(fs *flag.FlagSet, io cmdIO) runner {
	return func(fs *flag.FlagSet, io cmdIO) runner {
		stdout := io.stdout
		connect := dialClient(fs)
		var note, reason, edited, digest, as *string
		switch sub {
		case "approve":
			note = fs.String("note", "", "approval note")
			edited = fs.String("arguments", "", "approve with these arguments instead of the proposed ones (a JSON object)")
			digest = fs.String("digest", "", "the ticket's arguments_digest this approval approves, as `tickets show` printed it (default: the digest of the ticket read now)")
		case "deny":
			reason = fs.String("reason", "", "denial reason")
		}
		if sub == "approve" || sub == "deny" {
			as = fs.String("as", env("AWAKEN_ACTOR", defaultActor()), "who decides, recorded with the resolution as claimed (env AWAKEN_ACTOR; default: the OS user)")
		}
		asJSON := jsonFlag(fs, stdout)
		return func(ctx context.Context, args []string) error {
			if sub == "ls" && len(args) != 0 || sub != "ls" && len(args) != 1 {
				return &usageError{"usage: " + ticketsUsage(sub)}
			}
			c, ctx, done, err := connect(ctx)
			if err != nil {
				return err
			}
			defer done()
			if sub == "ls" {
				ts, err := c.Tickets(ctx)
				if err != nil {
					return err
				}
				sort.Slice(ts, func(i, j int) bool { return ts[i].OpenedAt.Before(ts[j].OpenedAt) })
				if ts == nil {
					ts = []contracts.ResumeTicket{}
				}
				return renderTickets(stdout, ts, *asJSON)
			}
			t, err := c.Ticket(ctx, args[0])
			if err != nil {
				return err
			}
			if sub == "show" {
				return renderTicket(stdout, t, *asJSON)
			}
			var d contracts.PermissionDecision
			if sub == "approve" {
				d = contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: *note}
				if *edited != "" {
					if !json.Valid([]byte(*edited)) {
						return &usageError{"--arguments must be JSON (an object of the tool's arguments)"}
					}
					d.Arguments = json.RawMessage(*edited)
				}
				// Bound to what was shown: the gate refuses another digest (digest_mismatch).
				d.ArgumentsDigest = *digest
			} else {
				d = contracts.PermissionDecision{Decision: contracts.DecisionDeny, Reason: *reason}
			}
			res, err := c.Decide(ctx, t, d, *as)
			if err != nil {
				return err
			}
			return renderResolution(stdout, res, *asJSON)
		}
	}
}

// ticketsUsage is the synopsis of `awaken tickets sub`.
func ticketsUsage(sub string) string {
	for _, c := range find(commands(), "tickets").subs {
		if c.name == sub {
			return c.usage
		}
	}
	return sub
}

// defaultActor is who the CLI records as deciding without --as: "cli:{OS user}", or "cli".
func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

func runsCancelCommand(fs *flag.FlagSet, io cmdIO) runner {
	connect := dialClient(fs)
	reason := fs.String("reason", "cancelled by operator", "why")
	asJSON := jsonFlag(fs, io.stdout)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{"usage: awaken runs cancel RUN_ID [--reason TEXT] [--timeout 60s]"}
		}
		runID := args[0]
		if err := contracts.ValidateID("run_id", runID); err != nil {
			return err
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		// Answers once the run has ended (the gate's io.awaken.run.ended.v1), so a step
		// submitted after this command returns is refused; --timeout bounds the wait.
		ended, err := c.CancelRun(ctx, runID, *reason)
		if errors.Is(err, client.ErrCancelPending) {
			return fmt.Errorf("run %s: the cancel is stored and will be applied, but the run was not seen ended in time (sending it again is harmless): %w", runID, err)
		}
		if err != nil {
			return err
		}
		return renderCancel(io.stdout, ended, *reason, *asJSON)
	}
}

func counterCommand(fs *flag.FlagSet, io cmdIO) runner {
	connect := dialClient(fs)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{"usage: awaken counter NAME"}
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		// The example counter tool's counter, read from the bucket the way the tool keeps it
		// (0 when never incremented): the example tool's state is no part of the platform
		// client.
		n, err := execcore.ReadDeploymentCounter(ctx, c.js, c.Names(), builtin.CounterKey(args[0]))
		if err != nil {
			return err
		}
		fmt.Fprintln(io.stdout, n)
		return nil
	}
}

// parseArgs parses flags wherever they appear among the positional arguments, so both
// `awaken submit FILE --wait` and `awaken submit --wait FILE` work; fs.Args() then holds
// the positional arguments in order.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...) // everything after "--" is positional
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parsing only positional arguments (none starts with '-') sets fs.Args to them.
	return fs.Parse(append([]string{"--"}, positional...))
}
