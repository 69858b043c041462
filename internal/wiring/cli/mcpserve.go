package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// runMCPServe implements `awaken mcp-serve`: an MCP server on stdin/stdout for a local MCP
// client (Claude Desktop, an IDE agent), whose every tools/call is a batch of a running
// awaken, submitted over NATS (the api must run: the catalog is its tools.list).
func runMCPServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return invoke(ctx, "mcp-serve", mcpServeCommand, args, cmdIO{stdin: stdin, stdout: stdout, stderr: stderr})
}

func mcpServeCommand(fs *flag.FlagSet, cio cmdIO) runner {
	stdin, stdout, stderr := cio.stdin, cio.stdout, cio.stderr
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL of the running awaken")
	prefix := fs.String("prefix", env("AWAKEN_PREFIX", contracts.DefaultPrefix), "subject prefix of the deployment")
	cfgPath := fs.String("config", env("AWAKEN_CONFIG", ""), "host configuration file whose mcp_serve section narrows the tools and bounds the session (default: none, every tool)")
	actor := fs.String("actor", env("AWAKEN_ACTOR", defaultActor()), "who asks, recorded in the batches' metadata and the audit (claimed: no door authenticates it) and matched against mcp_serve.clients")
	agentTools := fs.String("agent-tools", "", "comma-separated tool ids to narrow the session's tools to")
	apiURL := fs.String("api-url", env("AWAKEN_API_URL", ""), "base URL of the HTTP api, named where an error says how to fetch a result")
	logLevel := fs.String("log-level", env("AWAKEN_LOG_LEVEL", "info"), "log level (the log goes to stderr: stdout is the MCP stream)")
	auth := natsAuthFlags(fs)
	return func(ctx context.Context, _ []string) error {
		var cfg *config.Config
		var err error
		if *cfgPath != "" {
			cfg, err = config.Load(*cfgPath)
		} else {
			cfg, err = config.Parse([]byte("{}"))
		}
		if err != nil {
			return err
		}
		var narrow []string
		if *agentTools != "" {
			narrow = []string{}
			for _, id := range strings.Split(*agentTools, ",") {
				if id = strings.TrimSpace(id); id != "" {
					narrow = append(narrow, id)
				}
			}
		}
		authOpts, err := auth()
		if err != nil {
			return err
		}
		nc, err := nats.Connect(*url, append([]nats.Option{nats.Name("awaken-mcp-serve"), nats.MaxReconnects(-1)}, authOpts...)...)
		if err != nil {
			return fmt.Errorf("connect %s: %w", *url, err)
		}
		c, err := client.New(nc, client.WithPrefix(*prefix), client.WithSource("awaken/mcp"), client.KeepLinks())
		if err != nil {
			nc.Close()
			return err
		}
		defer c.Close()
		log := servicerun.NewLogger(stderr, *logLevel).With().Str("component", "mcp-serve").Logger()
		// No audit key: the stdio door's records are the runner's claims, stored unsigned on
		// the claims stream; the key signs the services' trail and stays with them.
		door, err := mcpserve.New(mcpserve.Options{Client: c, Config: cfg.MCPServe, Log: log, APIBase: *apiURL,
			Catalog: func(ctx context.Context) ([]contracts.CatalogTool, error) { return c.Tools(ctx) }})
		if err != nil {
			return err
		}
		defer door.Stop()
		log.Info().Str("nats", *url).Str("actor", *actor).Msg("awaken mcp-serve: serving MCP on stdio")
		return door.ServeStdio(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}, *actor, narrow)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
