package cloudevent

import "testing"

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
