package contracts

import (
	"errors"
	"strings"
	"testing"
)

// providerCallIDs are call ids as providers make them, and ids a naive encoding would merge.
var providerCallIDs = []string{
	"call_Xk3mP9qR2sT7uV1wY5zA8bC4", // OpenAI Chat Completions / Responses
	"toolu_01A09q90qw90lq917835lq9", // Anthropic
	"D681PevKs",                     // Mistral: nine alphanumerics
	"functions.echo:0",              // OpenAI-compatible servers (vLLM, Kimi, …)
	"functions.echo_0",              // would collide with the above if '.' and ':' became '_'
	"functions_echo_0",
	"a.b", "a_b", "a-b", "a:b", "a/b", "a b", "a*b", "a>b", // subject-breaking characters
	"=YQ",                                   // looks like an encoded "a"
	"YQ",                                    // the base64 of "a", verbatim
	"é",                                     // non-ASCII
	"🔧:1",                                   // four-byte UTF-8
	strings.Repeat("x", MaxCallIDLength),    // 256 bytes, verbatim
	strings.Repeat("é", MaxCallIDLength/2),  // 256 bytes, encoded
	strings.Repeat("a.", MaxCallIDLength/2), // 256 bytes of dots
}

func TestValidateCallID(t *testing.T) {
	for _, id := range providerCallIDs {
		if err := ValidateCallID("call_id", id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxCallIDLength+1), "a\nb", "a\x00b", "tab\t", "del\x7f", "c1\u0085", "\xff"} {
		if err := ValidateCallID("call_id", bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("%q: %v, want ErrInvalidID", bad, err)
		}
	}
}

// TestEncodeCallID: every name built from a call id is safe and collision-free, and the
// encoding inverts; ids of the old grammar keep their old names.
func TestEncodeCallID(t *testing.T) {
	seen := map[string]string{}
	keys := map[string]string{}
	corrs := map[string]string{}
	for _, id := range providerCallIDs {
		enc := EncodeCallID(id)
		if prev, dup := seen[enc]; dup {
			t.Errorf("%q and %q both encode to %q", prev, id, enc)
		}
		seen[enc] = id
		if back, err := DecodeCallID(enc); err != nil || back != id {
			t.Errorf("decode(encode(%q)) = %q, %v", id, back, err)
		}
		for _, c := range enc {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=') {
				t.Errorf("%q encodes to %q holding %q", id, enc, c)
			}
		}
		key := CallKey(TargetBrain, "run-1", 3, id)
		if prev, dup := keys[key]; dup {
			t.Errorf("%q and %q share the call key %q", prev, id, key)
		}
		keys[key] = id
		if n := strings.Count(key, "."); n != 3 {
			t.Errorf("call key %q of %q has %d dots", key, id, n)
		}
		corr := CorrelationID(ReasonClientExecution, strings.Repeat("r", MaxIDLength), 1<<62, id)
		if prev, dup := corrs[corr]; dup {
			t.Errorf("%q and %q share the correlation id %q", prev, id, corr)
		}
		corrs[corr] = id
		if err := validateCorrelationID(corr); err != nil {
			t.Errorf("correlation id of %q: %v", id, err)
		}
		reason, run, step, back, err := ParseCorrelationID(corr)
		if err != nil || reason != ReasonClientExecution || run != strings.Repeat("r", MaxIDLength) || step != 1<<62 || back != id {
			t.Errorf("parse correlation of %q: %v %q %d %q %v", id, reason, run, step, back, err)
		}
		name := ObjectName(OperationID(strings.Repeat("r", MaxIDLength), 1<<62, id), strings.Repeat("f", 64))
		if err := ValidateObjectName(name); err != nil {
			t.Errorf("object name of %q: %v", id, err)
		}
	}
	for _, id := range []string{"call_1", "c1", "toolu_01A09q90qw90lq917835lq9", "D681PevKs"} {
		if EncodeCallID(id) != id || CallKey(TargetBrain, "r", 1, id) != "brain.r.1."+id || OperationID("r", 1, id) != "tool-batch:r:1:"+id {
			t.Errorf("%q: a subject-safe id is its own name", id)
		}
	}
	if got := EncodeCallID("functions.echo:0"); got != "=ZnVuY3Rpb25zLmVjaG86MA" {
		t.Errorf("functions.echo:0 encodes to %q", got)
	}
	for _, bad := range []string{"", "=", "=YQ", "=!!", "a.b", "=YQ=", "=AA"} { // "=YQ" is a, which is verbatim
		if _, err := DecodeCallID(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("DecodeCallID(%q) = %v, want ErrInvalidID", bad, err)
		}
	}
}
