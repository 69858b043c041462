package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestErrorBodyIsCodeAndMessage: the status and the cause stay on the server's side of the
// wire — the body of a refusal is {"code","message"} and nothing else — while errors.Is
// still reaches the cause.
func TestErrorBodyIsCodeAndMessage(t *testing.T) {
	cause := errors.New("kv: bucket gone")
	e := &httpapi.Error{Code: httpapi.CodeInternal, Message: "internal error", Status: http.StatusInternalServerError, Err: cause}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"code":"internal","message":"internal error"}`; got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	if !errors.Is(e, cause) {
		t.Error("errors.Is does not reach the cause")
	}
	if got, want := e.Error(), "internal: internal error"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
