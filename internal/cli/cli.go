// Package cli implements the awaken command line: the service subcommands, `dev`, and the
// client commands a person uses against a running deployment.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const usage = `awaken — durable execution of AI-agent tool calls on NATS JetStream

Services:
  awaken dev            all five services on an embedded JetStream server
  awaken batcher        persist submitted batches, dispatch calls in model order
  awaken gate           permission gate, approval tickets, schedules, cancellation
  awaken brain-exec     run brain tools (in-process Go tools, MCP servers)
  awaken sandbox-exec   run sandbox tools (WebAssembly)
  awaken publisher      publication barrier: ordered, atomic results
  awaken setup          create or update the streams and buckets (as the NATS admin user)

Operations:
  awaken healthcheck URL               exit 0 iff GET URL answers 200 (container health checks)

Client:
  awaken submit FILE [--wait]          submit a batch (JSON), optionally wait for its results
  awaken tickets ls                    list open approval tickets
  awaken tickets show CORRELATION_ID   show one ticket
  awaken tickets approve CORRELATION_ID [--note TEXT]
  awaken tickets deny CORRELATION_ID [--reason TEXT]
  awaken runs cancel RUN_ID            seal the open batches of a run
  awaken counter NAME                  read the example counter tool's durable count

Common flags: --config FILE (env AWAKEN_CONFIG), --nats-url URL (env NATS_URL),
--prefix PREFIX (client commands; env AWAKEN_PREFIX), NATS credentials --nats-user /
--nats-password (env NATS_USER, NATS_PASSWORD) or --nats-creds FILE (env NATS_CREDS),
--http ADDR (services and dev: /healthz and /readyz; env AWAKEN_HTTP).
Run "awaken CMD -h" for a command's flags.
`

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "dev":
		err = runDev(ctx, rest, stdout, stderr)
	case app.Batcher, app.Gate, app.BrainExec, app.SandboxExec, app.Publisher:
		err = runService(ctx, cmd, rest, stderr)
	case "setup":
		err = runSetup(ctx, rest, stdout, stderr)
	case "healthcheck":
		err = runHealthcheck(ctx, rest, stderr)
	case "submit":
		err = runSubmit(ctx, rest, stdout)
	case "tickets":
		err = runTickets(ctx, rest, stdout)
	case "runs":
		err = runRuns(ctx, rest, stdout)
	case "counter":
		err = runCounter(ctx, rest, stdout)
	default:
		fmt.Fprintf(stderr, "awaken: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "awaken %s: %v\n", cmd, err)
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
	fs := newFlags("dev")
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	data := fs.String("data", env("AWAKEN_DATA", ".awaken/data"), "JetStream data directory")
	listen := fs.String("listen", env("AWAKEN_LISTEN", "127.0.0.1:4222"), "address outside clients and the nats CLI connect to")
	secure := fs.Bool("secure", envBool("AWAKEN_SECURE"), "least-privilege NATS users of deploy/nats/auth.conf (passwords from AWAKEN_NATS_PASSWORD_<USER>, generated when unset)")
	httpAddr := fs.String("http", env("AWAKEN_HTTP", ""), "health listener address (/healthz, /readyz); empty for none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	o := app.DevOptions{Config: cfg, DataDir: *data, Listen: *listen, Secure: *secure, HTTP: *httpAddr}
	o.Ready = func(url string) {
		fmt.Fprintf(stdout, "awaken dev ready: %s (config %s, data %s)\n", url, cfg.Source, *data)
	}
	if *secure {
		if o.Passwords, err = devPasswords(); err != nil {
			return err
		}
		o.Ready = func(url string) {
			fmt.Fprintf(stdout, "awaken dev ready: %s (config %s, data %s, secure: connect as NATS_USER=%s NATS_PASSWORD=%s)\n",
				url, cfg.Source, *data, deploy.UserPlatform, o.Passwords[deploy.UserPlatform])
		}
	}
	return app.Dev(ctx, o)
}

func runService(ctx context.Context, name string, args []string, stderr io.Writer) error {
	fs := newFlags(name)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	auth := natsAuthFlags(fs)
	httpAddr := fs.String("http", env("AWAKEN_HTTP", ""), "health listener address (/healthz, /readyz); empty for none")
	ensure := fs.Bool("ensure", !envFalse("AWAKEN_ENSURE"), "create or update the streams and buckets at start; false waits for `awaken setup` to have done it (least-privilege users)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	authOpts, err := auth()
	if err != nil {
		return err
	}
	log := app.NewLogger(stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
	ready := &app.Readiness{}
	h, err := app.StartHealth(*httpAddr, ready, log.With().Str("service", name).Logger())
	if err != nil {
		return err
	}
	defer func() { _ = app.StopHealth(h) }()
	st, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{name},
		Dial: ready.Dial(app.ServiceDialer(*url, authOpts...)), Log: log, NoEnsure: !*ensure})
	if err != nil {
		return err
	}
	ready.SetStarted(true)
	log.Info().Str("service", name).Str("nats_url", *url).Msg("ready")
	<-ctx.Done()
	ready.SetStarted(false)
	log.Info().Str("service", name).Msg("draining")
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return st.Stop(stopCtx)
}

func dialClient(fs *flag.FlagSet) (func() (*client.Client, error), *time.Duration) {
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	prefix := fs.String("prefix", env("AWAKEN_PREFIX", contracts.DefaultPrefix), "subject prefix of the deployment")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait")
	auth := natsAuthFlags(fs)
	return func() (*client.Client, error) {
		authOpts, err := auth()
		if err != nil {
			return nil, err
		}
		nc, err := nats.Connect(*url, append([]nats.Option{nats.Name("awaken-cli"), nats.MaxReconnects(-1)}, authOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", *url, err)
		}
		c, err := client.New(nc, client.WithPrefix(*prefix), client.WithSource("awaken/cli"))
		if err != nil {
			nc.Close()
			return nil, err
		}
		return c, nil // Close drains nc
	}, timeout
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runSubmit(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("submit")
	dial, timeout := dialClient(fs)
	wait := fs.Bool("wait", false, "wait for the ordered results and print them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"usage: awaken submit FILE [--wait]"}
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	var sub contracts.BatchSubmission
	if err := json.Unmarshal(data, &sub); err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if !*wait {
		id, err := c.Submit(ctx, sub)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]string{"batch_id": id})
	}
	res, err := c.SubmitAndWait(ctx, sub)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"batch_id": res.BatchID, "results": res.Results, "finalized": res.Finalized})
}

func runTickets(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return &usageError{"usage: awaken tickets ls | show ID | approve ID [--note TEXT] | deny ID [--reason TEXT]"}
	}
	sub, args := args[0], args[1:]
	fs := newFlags("tickets " + sub)
	dial, timeout := dialClient(fs)
	note := fs.String("note", "", "approval note (approve)")
	reason := fs.String("reason", "", "denial reason (deny)")
	// Accept the id before or after the flags.
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch sub {
	case "ls", "list":
		ts, err := c.Tickets(ctx)
		if err != nil {
			return err
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].OpenedAt.Before(ts[j].OpenedAt) })
		if ts == nil {
			ts = []contracts.ResumeTicket{}
		}
		return printJSON(stdout, ts)
	case "show", "approve", "deny":
		if id == "" {
			return &usageError{"usage: awaken tickets " + sub + " CORRELATION_ID"}
		}
		t, err := c.Ticket(ctx, id)
		if err != nil {
			return err
		}
		switch sub {
		case "show":
			return printJSON(stdout, t)
		case "approve":
			res, err := c.Approve(ctx, t, *note)
			if err != nil {
				return err
			}
			return printJSON(stdout, res)
		default:
			res, err := c.Deny(ctx, t, *reason)
			if err != nil {
				return err
			}
			return printJSON(stdout, res)
		}
	}
	return &usageError{fmt.Sprintf("unknown tickets command %q", sub)}
}

func runRuns(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 2 || args[0] != "cancel" {
		return &usageError{"usage: awaken runs cancel RUN_ID [--reason TEXT]"}
	}
	runID := args[1]
	fs := newFlags("runs cancel")
	dial, timeout := dialClient(fs)
	reason := fs.String("reason", "cancelled by operator", "why")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if err := contracts.ValidateID("run_id", runID); err != nil {
		return err
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := c.Cancel(ctx, runID, *reason); err != nil {
		return err
	}
	return printJSON(stdout, map[string]string{"run_id": runID, "status": "cancel requested"})
}

func runCounter(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("counter")
	dial, timeout := dialClient(fs)
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" {
		return &usageError{"usage: awaken counter NAME"}
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, err := c.Counter(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, n)
	return nil
}
