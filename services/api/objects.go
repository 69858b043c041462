package api

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// httpObject is GET /v1/objects/{name}: the bytes of an output stored by reference, with
// the media type the executor stored it under, streamed chunk by chunk.
func (s *Service) httpObject(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, info, err := s.client.OpenObject(r.Context(), name)
	if errors.Is(err, client.ErrObjectNotFound) {
		s.writeError(w, r, apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no object %q (it may have expired with its results)", name))
		return
	}
	if err != nil {
		s.writeError(w, r, apiErr(http.StatusInternalServerError, httpapi.CodeInternal, "object %s: %v", name, err))
		return
	}
	// Verified before anything is sent: a mismatch must be a 502, not a 200 with the
	// wrong bytes. The object is read twice (here to hash it, then to send it) so that a
	// large one is never held whole; the second read is verified again, and a mismatch
	// then (an overwrite in between) aborts the response, which the client sees as cut.
	_, err = io.Copy(io.Discard, body)
	body.Close()
	if errors.Is(err, client.ErrObjectDigest) {
		s.log.Error().Err(err).Str("object", name).Msg("stored object refused: its bytes do not match its name")
		s.writeError(w, r, apiErr(http.StatusBadGateway, httpapi.CodeObjectDigest, "object %s: its stored bytes do not match the digest in its name; refused", name))
		return
	}
	if err != nil {
		s.writeError(w, r, apiErr(http.StatusInternalServerError, httpapi.CodeInternal, "object %s: %v", name, err))
		return
	}
	if body, info, err = s.client.OpenObject(r.Context(), name); err != nil {
		s.writeError(w, r, apiErr(http.StatusInternalServerError, httpapi.CodeInternal, "object %s: %v", name, err))
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
		if errors.Is(err, client.ErrObjectDigest) {
			panic(http.ErrAbortHandler) // never complete a response with refused bytes
		}
	}
}
