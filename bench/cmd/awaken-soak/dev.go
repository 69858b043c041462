package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// devProcess is one `awaken dev` process on the soak's data directory.
type devProcess struct {
	cmd  *exec.Cmd
	url  string
	logs *logCounter
	done chan error
}

// readyLine is what `awaken dev` prints on stdout once everything is up.
var readyLine = regexp.MustCompile(`^awaken dev ready: (nats://\S+),`)

// startDev starts `awaken dev` on dataDir with configPath, listening on a free loopback
// port with HTTP off, and waits (up to timeout) for its ready line. Its log (stderr) is
// appended to logPath and its warnings and errors counted.
func startDev(bin, configPath, dataDir, logPath, sync string, timeout time.Duration) (*devProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "dev", "--config", configPath, "--data", dataDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", "", "--sync", sync)
	counter := &logCounter{w: logFile}
	cmd.Stderr = counter
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s dev: %w", bin, err)
	}
	p := &devProcess{cmd: cmd, logs: counter, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.done <- err
	}()
	select {
	case p.url = <-ready:
		return p, nil
	case err := <-p.done:
		p.done <- err
		return nil, fmt.Errorf("awaken dev exited before it was ready (%v); its log: %s", err, logPath)
	case <-time.After(timeout):
		_ = p.stop(10 * time.Second)
		return nil, fmt.Errorf("awaken dev not ready after %s; its log: %s", timeout, logPath)
	}
}

// stop asks the process to stop (SIGTERM: the graceful stop) and waits up to timeout,
// then kills it.
func (p *devProcess) stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("awaken dev stopped with %w", err)
		}
		return err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		return fmt.Errorf("awaken dev did not stop within %s: killed", timeout)
	}
}

// memory is the process's resident set (/proc/<pid>/status): VmRSS, and its two parts,
// RssAnon (the Go runtime's memory: what the soft memory limit governs) and RssFile (the
// executable's pages mapped from its file, which the limit does not count and the kernel
// may drop and read back). Zeros when unreadable.
type memory struct {
	RSSMiB  float64 `json:"rss_mib"`
	AnonMiB float64 `json:"rss_anon_mib"`
	FileMiB float64 `json:"rss_file_mib"`
}

func (p *devProcess) memory() memory {
	var m memory
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var kib float64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kib); err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			m.RSSMiB = kib / 1024
		case "RssAnon":
			m.AnonMiB = kib / 1024
		case "RssFile":
			m.FileMiB = kib / 1024
		}
	}
	return m
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logCounter writes the process's log through and counts its warning and error lines.
type logCounter struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	warns   int
	errs    int
	last    []string // the last few warning or error lines
}

func (c *logCounter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, b...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		line := string(c.partial[:i])
		c.partial = c.partial[i+1:]
		switch {
		case strings.Contains(line, `"level":"warn"`):
			c.warns++
		case strings.Contains(line, `"level":"error"`), strings.Contains(line, `"level":"fatal"`):
			c.errs++
		default:
			continue
		}
		c.last = append(c.last, line)
		if len(c.last) > 5 {
			c.last = c.last[1:]
		}
	}
	return c.w.Write(b)
}

// counts returns the warning and error lines so far and the last few of them.
func (c *logCounter) counts() (warns, errs int, last []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warns, c.errs, append([]string(nil), c.last...)
}

// soakLimit is the host limit the soak adds to the example's policy: one count per run,
// too high to block a call (a batch has at most 10), so every call writes the limits
// ledger and every run leaves a key there that must go with its run record.
const soakLimit = "    - { name: soak-per-run, tools: [echo], key: run, count: 1000 }\n"

// soakConfig writes the host configuration the soak runs: the example configuration
// with relative sandbox module paths made absolute (the copy lives elsewhere), the
// per-run limit [soakLimit] in its policy and a `retention:` section whose default is
// retention. An example with a retention or limits section of its own is refused rather
// than given two.
func soakConfig(example, dir, retention string) (string, error) {
	b, err := os.ReadFile(example)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(filepath.Dir(example))
	if err != nil {
		return "", err
	}
	var out strings.Builder
	policy := false
	for _, line := range strings.SplitAfter(string(b), "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "retention:"):
			return "", fmt.Errorf("%s has a retention section already; the soak sets its own", example)
		case strings.HasPrefix(trimmed, "limits:"):
			return "", fmt.Errorf("%s has limits already; the soak sets its own", example)
		case strings.HasPrefix(line, "policy:") && trimmed != "policy:":
			return "", fmt.Errorf("%s writes its policy on one line; the soak adds a limit to a block policy", example)
		}
		if m := modulePath.FindStringSubmatch(line); m != nil && !filepath.IsAbs(m[2]) {
			line = m[1] + filepath.Join(abs, m[2]) + m[3]
		}
		out.WriteString(line)
		if strings.TrimRight(line, "\r\n") == "policy:" {
			policy = true
			out.WriteString("  limits:\n" + soakLimit)
		}
	}
	if !policy {
		out.WriteString("\npolicy:\n  limits:\n" + soakLimit)
	}
	fmt.Fprintf(&out, "\nretention:\n  default: %s\n", retention)
	path := filepath.Join(dir, "awaken-soak.yaml")
	return path, os.WriteFile(path, []byte(out.String()), 0o644)
}

var modulePath = regexp.MustCompile(`^(\s*module:\s*)(\S+)(.*\n?)$`)
