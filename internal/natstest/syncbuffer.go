package natstest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe to write from a server's or a command's goroutines
// while the test reads it: the log sink of tests that assert on log lines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
