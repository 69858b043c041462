package api

import "testing"

// TestReplyAllowed: the api answers into inboxes only — never a bucket key, a stream
// subject or a wildcard.
func TestReplyAllowed(t *testing.T) {
	for reply, want := range map[string]bool{
		"_INBOX.abc":                  true,
		"_INBOX.abc.def":              true,
		"_INBOX_api.x":                true,
		"_INBOX.":                     false,
		"_INBOX_api":                  false,
		"_INBOX_.x":                   false,
		"_INBOX.>":                    false,
		"_INBOX.*":                    false,
		"":                            false,
		"$KV.AWAKEN_tool_pauses.ZWNo": false,
		"$KV.AWAKEN_tools.brain":      false,
		"awaken.results.r1":           false,
		"awaken.audit.r1":             false,
		"x._INBOX.abc":                false,
	} {
		if got := ReplyAllowed(reply); got != want {
			t.Errorf("ReplyAllowed(%q) = %v, want %v", reply, got, want)
		}
	}
}
