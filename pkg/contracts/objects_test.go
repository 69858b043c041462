package contracts

import "testing"

func TestObjectNamesAndLinks(t *testing.T) {
	name := ObjectName("tool-batch:run-7:3:call_1", "9f86d081884c7d65a2b3c4d5e6f70812")
	if name != "tool-batch:run-7:3:call_1.9f86d081884c7d65" || ValidateObjectName(name) != nil {
		t.Fatalf("object name %q", name)
	}
	if got, ok := ObjectNameOfURI(ObjectURI(name)); !ok || got != name {
		t.Errorf("uri round trip: %q %v", got, ok)
	}
	for _, uri := range []string{"https://example.com/x", "awaken://objects/", "awaken://objects/a/b", "awaken://objects/a b"} {
		if _, ok := ObjectNameOfURI(uri); ok {
			t.Errorf("%q read as an object uri", uri)
		}
	}
	out := BlocksOutput("c", []ContentBlock{{Type: BlockText, Text: "x"}, ResourceLink(name, MimeTypeText, 42)}, false)
	if got, want := out.LinkText(), "awaken://objects/"+name+" (42 bytes)"; got != want {
		t.Errorf("LinkText %q, want %q", got, want)
	}
	if got := TextOutput("c", "plain").LinkText(); got != "" {
		t.Errorf("LinkText of a text output %q", got)
	}
}
