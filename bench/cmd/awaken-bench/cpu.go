package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// cpuPhase is the CPU one phase of -cpu-per-call cost the row's process: every goroutine
// of it (the services, the embedded nats-server, the client, the garbage collector), from
// getrusage, divided by the calls the phase completed.
type cpuPhase struct {
	Phase   string  `json:"phase"`
	Batches int     `json:"batches"`
	Calls   int     `json:"calls"`
	WallS   float64 `json:"wall_s"`
	// UserUs and SysUs are the process's user and system CPU per call, in microseconds.
	UserUs float64 `json:"user_us_per_call"`
	SysUs  float64 `json:"sys_us_per_call"`
	// Profile is the CPU profile of the phase (-cpuprofile), Shares what of its samples
	// nats-server, the garbage collector's background workers and the rest (the services,
	// the NATS client library, the benchmark's client) took (cpuShares).
	Profile string             `json:"profile,omitempty"`
	Shares  map[string]float64 `json:"shares,omitempty"`
}

func (p cpuPhase) totalUs() float64 { return p.UserUs + p.SysUs }

// cpuRusage is the process's user and system CPU time so far.
func cpuRusage() (user, sys time.Duration, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), nil
}

// measureCPU runs the -cpu-per-call phases on t: s.CPUCalls calls as sequential 1-call
// batches, the same number as sequential 10-call batches (one batch at a time, as the
// latency series), then the throughput phase (s.Runs concurrent runs of 10-call batches
// for s.Duration). Each phase starts after warm-up batches and is measured alone.
func measureCPU(ctx context.Context, t target, s settings, res *result) error {
	one := func(run string, step int64, n int) error {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		out, err := t.run(cctx, run, step, n)
		if err != nil {
			return fmt.Errorf("batch %s/%d: %w", run, step, err)
		}
		if len(out) != n || out[n-1] != fmt.Sprintf("x%d", n-1) {
			return fmt.Errorf("batch %s/%d: outputs %q", run, step, out)
		}
		return nil
	}
	phase := func(name string, body func() (batches, calls int, err error)) error {
		var prof *os.File
		ph := cpuPhase{Phase: name}
		if s.CPUProfile != "" {
			ph.Profile = s.CPUProfile + "." + name
			f, err := os.Create(ph.Profile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return err
			}
			prof = f
		}
		u0, s0, err := cpuRusage()
		if err != nil {
			return err
		}
		start := time.Now()
		batches, calls, err := body()
		wall := time.Since(start)
		u1, s1, rerr := cpuRusage()
		if prof != nil {
			pprof.StopCPUProfile()
			if cerr := prof.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if calls == 0 {
			return fmt.Errorf("%s: no call completed", name)
		}
		ph.Batches, ph.Calls, ph.WallS = batches, calls, wall.Seconds()
		ph.UserUs = float64((u1 - u0).Microseconds()) / float64(calls)
		ph.SysUs = float64((s1 - s0).Microseconds()) / float64(calls)
		if ph.Profile != "" {
			if ph.Shares, err = cpuShares(ph.Profile); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		res.CPU = append(res.CPU, ph)
		return nil
	}
	for _, n := range []int{1, 10} {
		run := fmt.Sprintf("cpu%d", n)
		for i := range s.Warmup {
			if err := one(run, int64(i+1), n); err != nil {
				return err
			}
		}
		batches := max(s.CPUCalls/n, 1)
		err := phase(fmt.Sprintf("sequential-%d", n), func() (int, int, error) {
			for i := range batches {
				if err := one(run, int64(s.Warmup+i+1), n); err != nil {
					return 0, 0, err
				}
			}
			return batches, batches * n, nil
		})
		if err != nil {
			return err
		}
	}
	// The throughput runs' first batches, outside the phase.
	for r := range s.Runs {
		if err := one(fmt.Sprintf("tp%d", r), 1, s.BatchCalls); err != nil {
			return err
		}
	}
	return phase(fmt.Sprintf("throughput-%d", s.BatchCalls), func() (int, int, error) {
		var batches int64
		_, b, err := throughputFrom(ctx, s, 2, throughputRunIDs(s.Runs, 1), func(ctx context.Context, run string, step int64) error {
			return one(run, step, s.BatchCalls)
		})
		batches = b
		return int(batches), int(batches) * s.BatchCalls, err
	})
}

// cpuShareRules name the shares cpuShares reports, tried in order on the frames of a
// sample (from its leaf to its root): the first rule one of them matches takes it.
var cpuShareRules = []struct{ name, frame string }{
	{"nats-server", "github.com/nats-io/nats-server/"},
	{"gc", "runtime.gcBgMarkWorker"},
}

// cpuShares reads the CPU profile at path and returns the share of its samples' CPU time
// that each of cpuShareRules took, and "rest".
func cpuShares(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	prof, err := readProfile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	by := map[string]int64{}
	var total int64
	for _, smp := range prof.samples {
		v := smp.value
		total += v
		name := "rest"
	rules:
		for _, r := range cpuShareRules {
			for _, fn := range smp.funcs {
				if strings.Contains(fn, r.frame) {
					name = r.name
					break rules
				}
			}
		}
		by[name] += v
	}
	out := map[string]float64{}
	for k, v := range by {
		if total > 0 {
			out[k] = float64(v) / float64(total)
		}
	}
	return out, nil
}

// printCPU prints each row's phases, the median over the row's repetitions of the CPU per
// call, and the split of the profiled CPU.
func printCPU(w io.Writer, results []result) {
	type key struct{ row, phase string }
	var order []key
	per := map[key][]cpuPhase{}
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Row, r.Error)
			continue
		}
		for _, p := range r.CPU {
			k := key{r.Row, p.Phase}
			if _, ok := per[k]; !ok {
				order = append(order, k)
			}
			per[k] = append(per[k], p)
		}
	}
	fmt.Fprintf(w, "%-22s %-16s %6s %12s %22s %10s %8s %8s %8s\n", "row", "phase", "calls", "wall/call", "CPU µs/call (median)", "each", "server", "gc", "rest")
	for _, k := range order {
		ps := per[k]
		slices.SortFunc(ps, func(a, b cpuPhase) int { return cmpFloat(a.totalUs(), b.totalUs()) })
		m := ps[len(ps)/2]
		var each []string
		for _, p := range per[k] {
			each = append(each, fmt.Sprintf("%.0f", p.totalUs()))
		}
		share := func(n string) string {
			if m.Shares == nil {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*m.Shares[n])
		}
		fmt.Fprintf(w, "%-22s %-16s %6d %10.0fµs %14.0f (u %.0f) %10s %8s %8s %8s\n", k.row, k.phase, m.Calls,
			1e6*m.WallS/float64(m.Calls), m.totalUs(), m.UserUs, strings.Join(each, ","), share("nats-server"), share("gc"), share("rest"))
		if m.Profile != "" {
			fmt.Fprintf(w, "%-22s %-16s profile of the median: %s\n", "", "", m.Profile)
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
