package mcpbridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// commandTransport runs an MCP server as a child process and speaks newline-delimited
// JSON-RPC over its stdin and stdout. It replaces the SDK's CommandTransport to own the
// pipes (so the bytes that reach the child can be counted for the dispatch probe), to put
// the child in its own process group (so launchers such as npx do not leave orphans) and
// to log its stderr.
type commandTransport struct {
	server  string
	command string
	args    []string
	grace   time.Duration
	log     zerolog.Logger
	// progress receives the server's progress notifications in wire order (progressConn).
	progress *progressRoutes
}

// Connect starts the child. The process is not bound to ctx: it lives until the session is
// closed or it exits by itself.
func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	cmd := exec.Command(t.command, t.args...)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	cmd.Stderr = &lineLogger{log: t.log.With().Str("stream", "stderr").Logger()}
	cmd.WaitDelay = t.grace
	configureProcess(cmd)
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW} {
			f.Close()
		}
		return nil, fmt.Errorf("start %s: %w", t.command, err)
	}
	// The child holds its own ends now.
	stdinR.Close()
	stdoutW.Close()
	child := &childProcess{
		cmd:    cmd,
		stdin:  stdinW,
		stdout: stdoutR,
		grace:  t.grace,
		exited: make(chan struct{}),
		log:    t.log,
	}
	go child.reap()
	t.log.Debug().Int("pid", cmd.Process.Pid).Msg("mcp server process started")
	conn, err := (&mcp.IOTransport{Reader: childStdout{child}, Writer: child}).Connect(ctx)
	if err != nil {
		child.Close()
		return nil, err
	}
	return progressConn{Connection: &probedStdioConn{Connection: conn, stdin: child}, routes: t.progress}, nil
}

// childProcess is one running MCP server process. It is the writer of its stdin (counting
// the bytes the pipe accepted) and owns its shutdown.
type childProcess struct {
	cmd     *exec.Cmd
	stdin   *os.File
	stdout  *os.File
	grace   time.Duration
	exited  chan struct{} // closed once the process has been reaped
	waitErr error         // set before exited is closed
	log     zerolog.Logger

	// written counts the bytes the stdin pipe accepted. It only grows.
	written atomic.Int64

	closeOnce sync.Once
}

func (c *childProcess) reap() {
	c.waitErr = c.cmd.Wait()
	close(c.exited)
	c.log.Debug().Int("pid", c.cmd.Process.Pid).AnErr("exit", c.waitErr).Msg("mcp server process exited")
}

// Write writes to the child's stdin and counts the bytes the pipe accepted.
func (c *childProcess) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// Close shuts the child down the way the MCP stdio transport asks clients to: close its
// stdin, wait for it to exit, then SIGTERM and finally SIGKILL its process group, each
// after the grace period. Whatever remains of its process group is killed once it has
// exited, so no grandchild outlives the session. It is idempotent and returns once the
// process has been reaped.
func (c *childProcess) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		if !c.waitExit(c.grace) {
			c.log.Warn().Int("pid", c.cmd.Process.Pid).Msg("mcp server did not exit after stdin was closed; terminating it")
			signalGroup(c.cmd, sigTerminate)
			if !c.waitExit(c.grace) {
				c.log.Warn().Int("pid", c.cmd.Process.Pid).Msg("mcp server did not exit after SIGTERM; killing it")
				signalGroup(c.cmd, sigKill)
				<-c.exited
			}
		}
		signalGroup(c.cmd, sigKill)
		c.stdout.Close()
	})
	return nil
}

func (c *childProcess) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// childStdout is the child's stdout for the SDK. Its Close does nothing: the SDK closes the
// reader before the writer, and the pipe must stay readable until the child has been shut
// down through [childProcess.Close], which closes it.
type childStdout struct{ c *childProcess }

func (r childStdout) Read(p []byte) (int, error) { return r.c.stdout.Read(p) }
func (r childStdout) Close() error               { return nil }

// maxStderrLine bounds one logged line of a child's stderr.
const maxStderrLine = 4096

// lineLogger logs a child's stderr line by line, at debug: MCP servers write protocol
// traces and banners there, which would flood an info log. exec.Cmd writes to it from
// one goroutine.
type lineLogger struct {
	log     zerolog.Logger
	pending []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxStderrLine - len(l.pending)
			if len(p) > room {
				l.pending = append(l.pending, p[:room]...)
				l.flush()
				p = p[room:]
				continue
			}
			l.pending = append(l.pending, p...)
			break
		}
		l.pending = append(l.pending, p[:i]...)
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) flush() {
	line := bytes.TrimRight(l.pending, "\r")
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	if len(line) > 0 {
		l.log.Debug().Msg(string(line))
	}
	l.pending = l.pending[:0]
}

// errNoTransport is returned for a server entry that names neither a command nor a URL
// (configuration validation normally rejects it earlier).
var errNoTransport = errors.New("server names neither a command nor a url")
