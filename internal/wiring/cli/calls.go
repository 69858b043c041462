package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const (
	callsCancelUsage  = "awaken calls cancel OPERATION_ID [--reason TEXT] [--as NAME] [--timeout 60s]"
	callsResolveUsage = "awaken calls resolve OPERATION_ID --ran (--text TEXT | --output FILE) | --not-run [--note TEXT] [--as NAME] [--timeout 60s]"
)

func callsCancelCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	connect := dialClient(fs)
	reason := fs.String("reason", "cancelled by operator", "why")
	as := fs.String("as", env("AWAKEN_ACTOR", defaultActor()), "who cancels, recorded on the call as claimed (env AWAKEN_ACTOR; default: the OS user)")
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{"usage: " + callsCancelUsage}
		}
		op := args[0]
		if _, _, _, err := contracts.ParseOperationID(op); err != nil {
			return err
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		res, err := c.CancelCall(ctx, op, *reason, *as)
		if errors.Is(err, client.ErrCallCancelPending) {
			return fmt.Errorf("call %s: the cancel is stored and will be applied, but the call was not seen ending in time "+
				"(a call its batch has not reached ends when the batch gets to it; sending it again is harmless): %w", op, err)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, res)
		}
		_, err = fmt.Fprintf(stdout, "call %s: %s (%s)\n", op, res.Status, res.Outcome)
		return err
	}
}

// cliResolverRole is the role a resolution from the CLI records: the CLI talks to NATS
// directly, as a user granted the control subjects (the operators' admin user), so the
// role is the one its subject stands for (docs/security.md#roles).
const cliResolverRole = "operator"

func callsResolveCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	connect := dialClient(fs)
	ran := fs.Bool("ran", false, "the call's effect happened: give its output with --text or --output")
	notRun := fs.Bool("not-run", false, "the call's effect did not happen (the model reads an error saying so, with the note)")
	text := fs.String("text", "", "with --ran: the call's output, as one text block")
	outputFile := fs.String("output", "", "with --ran: a file holding the call's output as a tool output JSON (call_id, content, ...)")
	note := fs.String("note", "", "what the operator checked (recorded; the model reads it for --not-run)")
	as := fs.String("as", env("AWAKEN_ACTOR", defaultActor()), "who resolves, recorded on the call as claimed (env AWAKEN_ACTOR; default: the OS user)")
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return &usageError{"usage: " + callsResolveUsage}
		}
		op := args[0]
		_, _, callID, err := contracts.ParseOperationID(op)
		if err != nil {
			return err
		}
		req := client.CallResolveRequest{Note: *note}
		switch {
		case *ran == *notRun:
			return &usageError{"calls resolve: give exactly one of --ran and --not-run\nusage: " + callsResolveUsage}
		case *notRun && (*text != "" || *outputFile != ""):
			return &usageError{"calls resolve: --not-run takes no output (--text, --output)"}
		case *notRun:
			req.Outcome = contracts.ReconcileNotRun
		case (*text == "") == (*outputFile == ""):
			return &usageError{"calls resolve: --ran needs exactly one of --text and --output"}
		case *text != "":
			out := contracts.TextOutput(callID, *text)
			req.Outcome, req.Output = contracts.ReconcileRan, &out
		default:
			data, err := os.ReadFile(*outputFile)
			if err != nil {
				return fmt.Errorf("calls resolve: %w", err)
			}
			var out contracts.ToolOutput
			if err := json.Unmarshal(data, &out); err != nil {
				return fmt.Errorf("calls resolve: %s: %w", *outputFile, err)
			}
			if out.CallID == "" {
				out.CallID = callID
			}
			req.Outcome, req.Output = contracts.ReconcileRan, &out
		}
		c, ctx, done, err := connect(ctx)
		if err != nil {
			return err
		}
		defer done()
		res, err := c.ResolveCall(ctx, op, req, *as, cliResolverRole)
		if errors.Is(err, client.ErrCallResolvePending) {
			return fmt.Errorf("call %s: the resolution is stored and will be applied, but was not seen recorded in time "+
				"(a batch finalized a moment ago is waited for until its results are published): %w", op, err)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, res)
		}
		how := "the batch's results carry it"
		if res.Status == contracts.ResolutionCorrected {
			how = "the batch was published: a correction went out beside its results"
		}
		_, err = fmt.Fprintf(stdout, "call %s: %s as %s (%s)\n", op, res.Status, res.Outcome, how)
		return err
	}
}
