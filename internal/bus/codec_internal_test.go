package bus

import (
	"strings"
	"testing"
)

func TestPercentEncoding(t *testing.T) {
	tests := []struct {
		name, in, out string
	}{
		{"safe ids are untouched", "tool-batch:run-7:3", "tool-batch:run-7:3"},
		{"space", "a b", "a%20b"},
		{"double quote", `a"b`, "a%22b"},
		{"percent", "100%", "100%25"},
		{"control characters", "a\r\n\tb", "a%0D%0A%09b"},
		{"delete", "a\x7fb", "a%7Fb"},
		{"non-ASCII as UTF-8 bytes", "é€", "%C3%A9%E2%82%AC"},
		{"printable punctuation stays", "a/b:c;d=e,f{g}", "a/b:c;d=e,f{g}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentEncode(tc.in); got != tc.out {
				t.Fatalf("percentEncode(%q) = %q, want %q", tc.in, got, tc.out)
			}
			back, err := percentDecode(tc.out)
			if err != nil || back != tc.in {
				t.Fatalf("percentDecode(%q) = %q, %v; want %q", tc.out, back, err, tc.in)
			}
		})
	}
}

func TestPercentDecodeLenient(t *testing.T) {
	tests := []struct {
		name, in, out string
		ok            bool
	}{
		{"lowercase hex", "a%2fb", "a/b", true},
		{"truncated escape", "a%2", "a%2", true},
		{"trailing percent", "a%", "a%", true},
		{"non-hex escape", "%zz", "%zz", true},
		{"invalid UTF-8 after decoding", "%FF", "", false},
		{"raw invalid UTF-8", "\xff", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := percentDecode(tc.in)
			if (err == nil) != tc.ok || (tc.ok && got != tc.out) {
				t.Fatalf("percentDecode(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.out, tc.ok)
			}
		})
	}
}

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
