package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/health"
	"github.com/awaken-dev/awaken/internal/servicerun"
)

// envBool reads a boolean environment variable; unset or unparsable is false.
func envBool(key string) bool {
	v, err := strconv.ParseBool(os.Getenv(key))
	return err == nil && v
}

// envFalse reports whether a boolean environment variable is set to false.
func envFalse(key string) bool {
	v, err := strconv.ParseBool(os.Getenv(key))
	return err == nil && !v
}

// envInt reads an integer environment variable; unset or unparsable is 0.
func envInt(key string) int {
	v, _ := strconv.Atoi(os.Getenv(key))
	return v
}

// natsAuthFlags adds the NATS credential flags to fs and returns the options they ask
// for: a user and password, or a credentials file (JWT and nkey seed), never both.
func natsAuthFlags(fs *flag.FlagSet) func() ([]nats.Option, error) {
	user := fs.String("nats-user", os.Getenv("NATS_USER"), "NATS user name")
	// No default from the environment: usage output would print it.
	password := fs.String("nats-password", "", "NATS password (default $NATS_PASSWORD; prefer the variable: flags show in process lists)")
	creds := fs.String("nats-creds", os.Getenv("NATS_CREDS"), "NATS credentials file (JWT and nkey seed)")
	return func() ([]nats.Option, error) {
		switch {
		case *creds != "" && *user != "":
			return nil, &usageError{"give either --nats-creds or --nats-user, not both"}
		case *creds != "":
			return []nats.Option{nats.UserCredentials(*creds)}, nil
		case *user != "":
			pw := *password
			if pw == "" {
				pw = os.Getenv("NATS_PASSWORD")
			}
			return []nats.Option{nats.UserInfo(*user, pw)}, nil
		}
		return nil, nil
	}
}

// devPasswords returns the password of every NATS user for `awaken dev --secure`: from
// AWAKEN_NATS_PASSWORD_<USER> where set, otherwise generated for this run.
func devPasswords() (map[string]string, error) {
	pw, err := deploy.GeneratePasswords()
	if err != nil {
		return nil, err
	}
	for _, u := range deploy.Users() {
		if v := os.Getenv(deploy.PasswordEnv(u)); v != "" {
			pw[u] = v
		}
	}
	return pw, nil
}

// setupCommand creates or updates the streams and buckets of the configuration, waiting for
// the server (or the cluster's meta leader) as long as --timeout allows.
func setupCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	url := fs.String("nats-url", defaultNATSURL(), "NATS server URL")
	auth := natsAuthFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the server")
	replicas := fs.Int("replicas", envInt("AWAKEN_REPLICAS"), "replicas of every stream and bucket, overriding storage.replicas of the configuration (3 for a 3-node cluster; 0 keeps the configuration's)")
	dryRun := fs.Bool("dry-run", false, "print what setup would create or change (store, setting, old → new) and change nothing")
	return func(ctx context.Context, _ []string) error {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		if *replicas < 0 {
			return &usageError{"--replicas must not be negative"}
		}
		if *replicas > 0 {
			cfg.Storage.Replicas = *replicas
		}
		authOpts, err := auth()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		log := servicerun.NewLogger(stderr, os.Getenv("AWAKEN_LOG_LEVEL")).With().Str("service", "setup").Logger()
		nc, err := nats.Connect(*url, append([]nats.Option{nats.Name("awaken-setup"), nats.RetryOnFailedConnect(true),
			nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}, authOpts...)...)
		if err != nil {
			return fmt.Errorf("connect %s: %w", *url, err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		if *dryRun {
			plan, err := servicerun.Plan(ctx, js, cfg, log)
			if err != nil {
				return err
			}
			for _, c := range plan {
				fmt.Fprintln(stdout, c)
			}
			fmt.Fprintf(stdout, "awaken setup --dry-run: %d change(s) for prefix %q; nothing was changed\n", len(plan), cfg.Names().Prefix)
			return nil
		}
		if err := servicerun.Setup(ctx, js, cfg, log); err != nil {
			return err
		}
		t := servicerun.TopologyFor(cfg)
		log.Info().Int("replicas", max(t.Replicas, 1)).Str("prefix", cfg.Names().Prefix).Msg("streams and buckets ensured")
		fmt.Fprintf(stdout, "awaken setup: streams and buckets of prefix %q ensured (%d replicas)\n", cfg.Names().Prefix, max(t.Replicas, 1))
		return nil
	}
}

// natsAuthCommand prints deploy/nats/auth.conf with the grants of every partition of the
// deployment ([deploy.PartitionedAuthConf]): the NATS servers of a deployment with
// storage.partitions above 1 load it instead of the image's one-partition file.
func natsAuthCommand(fs *flag.FlagSet, io cmdIO) runner {
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file whose storage.partitions to grant")
	partitions := fs.Int("partitions", 0, "the partition count to grant, instead of the configuration's storage.partitions")
	return func(_ context.Context, args []string) error {
		if len(args) != 0 {
			return &usageError{"usage: awaken nats-auth [--config FILE | --partitions N]"}
		}
		p := *partitions
		if p == 0 {
			cfg, err := config.Load(*cfgPath)
			if err != nil {
				return err
			}
			p = max(cfg.Storage.Partitions, 1)
		}
		if p < 1 || p > config.MaxPartitions {
			return &usageError{fmt.Sprintf("--partitions must be between 1 and %d", config.MaxPartitions)}
		}
		conf, err := deploy.PartitionedAuthConf(p)
		if err != nil {
			return err
		}
		_, err = io.stdout.Write(conf)
		return err
	}
}

// healthcheckCommand probes one URL; the exit code is 0 only for HTTP 200. A container
// built FROM scratch has no curl, so its health check runs this.
func healthcheckCommand(fs *flag.FlagSet, _ cmdIO) runner {
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return &usageError{"usage: awaken healthcheck URL [--timeout 3s]"}
		}
		return health.Probe(ctx, args[0], *timeout)
	}
}
