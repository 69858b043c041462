// Command probe is a sandbox test module that reports what it can observe: its
// arguments, environment, time zone, a per-instance counter, and its scratch directory
// (listing it, writing a marker holding the operation id, reading it back). With
// {"fill_bytes": N} on stdin it also writes N bytes into /scratch/fill and reports the
// error, if any, to exercise the scratch quota. The report is one JSON object on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// counter is incremented once per run; a fresh instance always reports 1.
var counter int

type scratchReport struct {
	Present       bool     `json:"present"`
	EntriesBefore []string `json:"entries_before"`
	ReadBack      string   `json:"read_back"`
	Error         string   `json:"error,omitempty"`
	FillError     string   `json:"fill_error,omitempty"`
	FillWritten   int      `json:"fill_written"`
}

type report struct {
	Args    []string      `json:"args"`
	Env     []string      `json:"env"`
	TZ      string        `json:"tz"`
	Year    int           `json:"year"`
	Counter int           `json:"counter"`
	Stdin   string        `json:"stdin"`
	Scratch scratchReport `json:"scratch"`
}

func main() {
	counter++
	var in struct {
		FillBytes int `json:"fill_bytes"`
	}
	data, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(data, &in)

	r := report{
		Args:    os.Args,
		Env:     os.Environ(),
		TZ:      zone(),
		Year:    time.Now().UTC().Year(),
		Counter: counter,
		Stdin:   string(data),
	}
	if entries, err := os.ReadDir("/scratch"); err == nil {
		r.Scratch.Present = true
		r.Scratch.EntriesBefore = []string{}
		for _, e := range entries {
			r.Scratch.EntriesBefore = append(r.Scratch.EntriesBefore, e.Name())
		}
		marker := os.Getenv("AWAKEN_OPERATION_ID")
		if err := os.WriteFile("/scratch/marker", []byte(marker), 0o600); err != nil {
			r.Scratch.Error = err.Error()
		} else if got, err := os.ReadFile("/scratch/marker"); err != nil {
			r.Scratch.Error = err.Error()
		} else {
			r.Scratch.ReadBack = string(got)
		}
		if in.FillBytes > 0 {
			r.Scratch.FillWritten, r.Scratch.FillError = fill("/scratch/fill", in.FillBytes)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	_ = enc.Encode(r)
}

// zone names the local time zone and its offset, e.g. "UTC+0".
func zone() string {
	name, offset := time.Now().Zone()
	return fmt.Sprintf("%s%+d", name, offset)
}

// fill writes n bytes to path in 64 KiB chunks and reports how far it got.
func fill(path string, n int) (int, string) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err.Error()
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	written := 0
	for written < n {
		w, err := f.Write(chunk[:min(len(chunk), n-written)])
		written += w
		if err != nil {
			return written, err.Error()
		}
	}
	return written, ""
}
