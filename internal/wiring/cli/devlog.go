package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/servicerun"
)

// Log formats of `awaken dev --log-format`.
const (
	logFormatAuto    = "auto"    // console on a terminal, JSON otherwise
	logFormatConsole = "console" // zerolog's console format: time, level, message, ids
	logFormatJSON    = "json"    // one JSON object per line, for log shippers
)

// logFlags declares --log-level and --log-format on fs and returns the logger they ask
// for once parsed.
func logFlags(fs *flag.FlagSet, stderr io.Writer) func() (zerolog.Logger, error) {
	level := fs.String("log-level", env("AWAKEN_LOG_LEVEL", "info"), "least level logged: trace, debug, info, warn, error (env AWAKEN_LOG_LEVEL; debug adds the MCP servers' stderr)")
	format := fs.String("log-format", env("AWAKEN_LOG_FORMAT", logFormatAuto), "log format: auto (console on a terminal, json otherwise), console or json (env AWAKEN_LOG_FORMAT)")
	return func() (zerolog.Logger, error) {
		if _, err := zerolog.ParseLevel(*level); err != nil || *level == "" {
			return zerolog.Logger{}, &usageError{fmt.Sprintf("--log-level %q: want trace, debug, info, warn or error", *level)}
		}
		switch *format {
		case logFormatJSON:
			return servicerun.NewLogger(stderr, *level), nil
		case logFormatConsole, logFormatAuto:
			if *format == logFormatAuto && !isTerminal(stderr) {
				return servicerun.NewLogger(stderr, *level), nil
			}
			return servicerun.NewLogger(consoleWriter(stderr), *level), nil
		}
		return zerolog.Logger{}, &usageError{fmt.Sprintf("--log-format %q: want auto, console or json", *format)}
	}
}

// consoleWriter is zerolog's console format for a person: the time of day (to the
// second, as the log's timestamps are), the level, the message, then the ids a line is
// about before any other field. Colour only on a terminal.
func consoleWriter(w io.Writer) zerolog.ConsoleWriter {
	_, isFile := w.(*os.File)
	return zerolog.ConsoleWriter{
		Out: w, TimeFormat: time.TimeOnly, NoColor: !isFile || !isTerminal(w),
		FieldsOrder: []string{"service", "run_id", "batch_id", "call_id", "tool_id"},
	}
}
