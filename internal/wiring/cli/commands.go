package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// cmdIO is what a command reads and writes.
type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runner runs a command once its flags are parsed; args are its positional arguments.
type runner func(ctx context.Context, args []string) error

// command is one node of the command tree: a group of subcommands (subs) or a command that
// runs (declare). declare only registers the command's flags on fs and returns what runs
// it: nothing of a command happens before [Main] has parsed its flags, so asking any
// command for help never connects, reads a file or parses an id.
type command struct {
	name    string
	aliases []string
	// usage is the command's synopsis lines, "awaken PATH ARGS…"; a group's is its
	// subcommands'.
	usage string
	// examples, when set, follow the usage in the command's help: typical invocations,
	// each with what it does, and what the flags alone do not say.
	examples string
	declare  func(fs *flag.FlagSet, io cmdIO) runner
	subs     []*command
}

// commands is the tree `awaken` dispatches on, in the order `awaken help` lists it.
func commands() []*command {
	service := func(name string) *command {
		return &command{name: name, usage: "awaken " + name + " [--config FILE] [--nats-url URL] [--http ADDR] [--ensure=false]",
			declare: func(fs *flag.FlagSet, io cmdIO) runner { return serviceCommand(name, fs, io) }}
	}
	return []*command{
		{name: "dev", usage: "awaken dev [--config FILE] [--data DIR] [--listen HOST:PORT] [--http HOST:PORT] [--secure]", declare: devCommand},
		service(contracts.ServiceBatcher),
		service(contracts.ServiceGate),
		{name: contracts.ServiceBrainExec, usage: "awaken brain-exec [--config FILE] [--nats-url URL] [--http ADDR] [--ensure=false]", declare: brainExecCommand},
		service(contracts.ServiceSandboxExec),
		service(contracts.ServicePublisher),
		{name: contracts.ServiceAPI, usage: "awaken api [--config FILE] [--nats-url URL] [--http HOST:PORT] [--api-token TOKEN | --api-tokens FILE]", declare: apiCommand},
		{name: "setup", usage: "awaken setup [--config FILE] [--nats-url URL] [--replicas N] [--timeout 2m]", declare: setupCommand},
		{name: "nats-auth", usage: "awaken nats-auth [--config FILE | --partitions N]", declare: natsAuthCommand},
		{name: "healthcheck", usage: "awaken healthcheck URL [--timeout 3s]", declare: healthcheckCommand},
		{name: "submit", usage: "awaken submit FILE [--wait] [--json]", declare: submitCommand},
		{name: "tickets", subs: []*command{
			{name: "ls", aliases: []string{"list"}, usage: "awaken tickets ls [--json]", declare: ticketsCommand("ls")},
			{name: "show", usage: "awaken tickets show CORRELATION_ID [--json]", declare: ticketsCommand("show")},
			{name: "approve", usage: "awaken tickets approve CORRELATION_ID [--note TEXT] [--arguments JSON] [--digest D] [--as NAME]", declare: ticketsCommand("approve")},
			{name: "deny", usage: "awaken tickets deny CORRELATION_ID [--reason TEXT] [--as NAME]", declare: ticketsCommand("deny")},
		}},
		{name: "runs", subs: []*command{
			{name: "cancel", usage: "awaken runs cancel RUN_ID [--reason TEXT] [--timeout 60s]", declare: runsCancelCommand},
		}},
		{name: "calls", subs: []*command{
			{name: "cancel", usage: callsCancelUsage, declare: callsCancelCommand},
			{name: "resolve", usage: callsResolveUsage, declare: callsResolveCommand},
		}},
		{name: "batch", subs: []*command{
			{name: "show", usage: "awaken batch show BATCH_ID [--json]", declare: batchShowCommand},
			{name: "watch", usage: "awaken batch watch BATCH_ID", declare: batchWatchCommand},
		}},
		{name: "counter", usage: "awaken counter NAME", declare: counterCommand},
		{name: "tools", subs: []*command{
			{name: "ls", aliases: []string{"list"}, usage: "awaken tools ls [--format " + strings.Join(contracts.CatalogFormats(), "|") + "] [--strict] [--agent-tools a,b]", declare: toolsLsCommand},
			{name: "pause", usage: "awaken tools pause TOOL_ID [--reason TEXT] [--as NAME]", declare: toolsPauseCommand("pause")},
			{name: "resume", usage: "awaken tools resume TOOL_ID [--as NAME]", declare: toolsPauseCommand("resume")},
		}},
		{name: "policy", subs: []*command{
			{name: "test", usage: policyUsage, declare: policyTestCommand},
		}},
		{name: "audit", subs: []*command{
			{name: "verify", usage: "awaken audit verify [--run R | --since T --until T | --from-seq N --to-seq M | --file EXPORT.jsonl] [--public-key HEX | --config FILE] [--without-checkpoint]", examples: auditVerifyExamples, declare: auditVerifyCommand},
			{name: "export", usage: "awaken audit export [--run R | --since T --until T | --from-seq N --to-seq M] --format jsonl [--out FILE] [--public-key HEX | --config FILE]", examples: auditExportExamples, declare: auditExportCommand},
			{name: "keygen", usage: "awaken audit keygen --out FILE", declare: auditKeygenCommand},
			{name: "key", usage: "awaken audit key [--config FILE]", declare: auditKeyCommand},
		}},
		{name: "mcp-serve", usage: "awaken mcp-serve [--actor NAME] [--config FILE] [--agent-tools a,b]", declare: mcpServeCommand},
	}
}

// synopsis is the usage lines of c: its own, or every one of its subcommands'.
func (c *command) synopsis() []string {
	if c.declare != nil {
		return strings.Split(c.usage, "\n")
	}
	var lines []string
	for _, s := range c.subs {
		lines = append(lines, s.synopsis()...)
	}
	return lines
}

// find is the subcommand of c named word, or nil.
func find(cs []*command, word string) *command {
	for _, c := range cs {
		if c.name == word {
			return c
		}
		for _, a := range c.aliases {
			if a == word {
				return c
			}
		}
	}
	return nil
}

// resolve walks the tree down by the leading words of args: the deepest command they name,
// its path ("calls cancel") and the arguments after it. c is nil when args[0] names no
// command.
func resolve(args []string) (c *command, path string, rest []string) {
	cs := commands()
	var words []string
	for len(args) > 0 {
		next := find(cs, args[0])
		if next == nil {
			break
		}
		c, words, args = next, append(words, next.name), args[1:]
		if c.declare != nil {
			break
		}
		cs = c.subs
	}
	return c, strings.Join(words, " "), args
}

// isHelpFlag reports whether arg asks for help the way the flag package understands it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// wantsHelp reports whether args ask for help: -h, --help or the word help anywhere
// before "--". fs, when given, tells a flag's value from a word: `--reason help` gives
// the reason "help".
func wantsHelp(fs *flag.FlagSet, args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return false
		case isHelpFlag(a), a == "help":
			return true
		case len(a) > 1 && a[0] == '-' && fs != nil && !strings.Contains(a, "="):
			f := fs.Lookup(strings.TrimLeft(a, "-"))
			if f == nil {
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
			i++ // the flag's value
		}
	}
	return false
}

// writeHelp prints the usage of c and, for a command that runs, its flags.
func writeHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n", strings.Join(c.synopsis(), "\n       "))
	if c.examples != "" {
		fmt.Fprintf(w, "\nexamples:\n%s\n", c.examples)
	}
	if fs == nil {
		fmt.Fprintf(w, "\nRun \"awaken %s CMD -h\" for a command's flags.\n", c.name)
		return
	}
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// dispatch runs the command args name, or prints its help when args ask for it: the one
// place help is detected, before any command runs.
func dispatch(ctx context.Context, args []string, io cmdIO) error {
	c, path, rest := resolve(args)
	if c == nil {
		return errUnknownCommand
	}
	if c.declare == nil {
		if wantsHelp(nil, rest) {
			writeHelp(io.stdout, c, nil)
			return nil
		}
		return &usageError{"usage: " + strings.Join(c.synopsis(), "\n       ")}
	}
	fs := newFlags(path)
	fs.SetOutput(io.stderr)
	run := c.declare(fs, io)
	if wantsHelp(fs, rest) {
		writeHelp(io.stdout, c, fs)
		return nil
	}
	fs.Usage = func() { writeHelp(fs.Output(), c, fs) }
	if err := parseArgs(fs, rest); err != nil {
		return err
	}
	return run(ctx, fs.Args())
}

// invoke runs one command declared by declare with args, as [dispatch] does once it found
// it (the tests of a command call it directly).
func invoke(ctx context.Context, name string, declare func(*flag.FlagSet, cmdIO) runner, args []string, io cmdIO) error {
	fs := newFlags(name)
	fs.SetOutput(io.stderr)
	run := declare(fs, io)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	return run(ctx, fs.Args())
}
