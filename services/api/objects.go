package api

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/awaken-dev/awaken/pkg/client"
)

// httpObject is GET /v1/objects/{name}: the bytes of an output stored by reference, with
// the media type the executor stored it under, streamed chunk by chunk.
func (s *Service) httpObject(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, info, err := s.client.OpenObject(r.Context(), name)
	if errors.Is(err, client.ErrObjectNotFound) {
		s.writeError(w, r, apiErr(http.StatusNotFound, CodeNotFound, "no object %q (it may have expired with its results)", name))
		return
	}
	if err != nil {
		s.writeError(w, r, apiErr(http.StatusInternalServerError, CodeInternal, "object %s: %v", name, err))
		return
	}
	defer body.Close()
	ctype := info.MimeType
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	// The console renders outputs as text only; a browser must never sniff an object
	// into HTML.
	w.Header().Set("Content-Disposition", "attachment")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		s.log.Warn().Err(err).Str("object", name).Msg("object read ended early")
	}
}
