package bus

import (
	"strings"
	"testing"
)

func TestSanitizeHeader(t *testing.T) {
	if got := sanitizeHeader("a\r\nb\x00c"); got != "a  b c" {
		t.Fatalf("control characters kept: %q", got)
	}
	long := strings.Repeat("é", maxReasonLen) // 2 bytes each
	got := sanitizeHeader(long)
	if len(got) > maxReasonLen || !strings.HasPrefix(long, got) || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("truncation broke a rune or exceeded the limit: len %d", len(got))
	}
}

func TestBackoffSchedule(t *testing.T) {
	s := ConsumerSpec{BackOff: DefaultBackOff()}.withDefaults()
	want := DefaultBackOff()
	for n := uint64(1); n <= uint64(len(want))+3; n++ {
		i := min(int(n), len(want)) - 1
		if got := s.backoff(n); got != want[i] {
			t.Fatalf("backoff(%d) = %s, want %s", n, got, want[i])
		}
	}
	if got := s.backoff(0); got != want[0] {
		t.Fatalf("backoff(0) = %s", got)
	}
}
