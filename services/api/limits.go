package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// maxLimitUses bounds the ledger entries one GET /v1/limits reports.
const maxLimitUses = 1000

// httpLimits answers GET /v1/limits[?limit=NAME]: the host limits and their current use,
// read from the limits ledger. A ledger that does not exist yet (a deployment set up
// before limits) reports no use.
func (s *Service) httpLimits(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Limits(r.Context(), r.URL.Query().Get("limit"))
	s.reply(w, r, rep, err)
}

// Limits reads the host limits' current use; only, when not empty, names one limit.
func (s *Service) Limits(ctx context.Context, only string) (httpapi.LimitsReport, error) {
	rep := httpapi.LimitsReport{Limits: []httpapi.LimitInfo{}, Use: []contracts.LimitUse{}}
	p, err := contracts.CompilePolicy(s.env.Config.Policy)
	if err != nil {
		return rep, apiErr(http.StatusInternalServerError, httpapi.CodeInternal, "host policy: %v", err)
	}
	byName := map[string]contracts.Limit{}
	for _, l := range p.Limits() {
		if only != "" && l.Name != only {
			continue
		}
		byName[l.Name] = l
		info := httpapi.LimitInfo{Name: l.Name, Kind: l.Kind, Key: l.Key, Max: l.Max(), Over: l.Over, Shadow: l.Shadow}
		if l.Window > 0 {
			info.Window = l.Window.String()
		}
		rep.Limits = append(rep.Limits, info)
	}
	if only != "" && len(rep.Limits) == 0 {
		return rep, apiErr(http.StatusNotFound, httpapi.CodeNotFound, "no host limit is named %q", only)
	}
	if len(rep.Limits) == 0 {
		return rep, nil
	}
	kv, err := s.env.LimitsBucket(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return rep, nil
	}
	if err != nil {
		return rep, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "limits ledger: %v", err)
	}
	filter := ">"
	if only != "" {
		filter = only + ".>"
	}
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return rep, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "limits ledger: %v", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop()
	slices.Sort(keys)
	for _, k := range keys {
		name, _, _, perr := contracts.ParseLimitLedgerKey(k)
		l, configured := byName[name]
		if perr != nil || !configured {
			continue // a limit removed from the configuration, or a foreign key
		}
		if len(rep.Use) == maxLimitUses {
			rep.Truncated = true
			break
		}
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return rep, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "limits ledger %s: %v", k, err)
		}
		var entry contracts.LimitLedgerEntry
		err = contracts.DecodeRecordStrict(e.Value(), &entry)
		if err != nil {
			s.log.Error().Err(err).Str("key", k).Msg("limits ledger entry does not decode")
			continue
		}
		if entry.Window != nil && l.Window > 0 && time.Since(entry.Window.Add(l.Window)) > 0 {
			continue // a window that is over holds no current use
		}
		rep.Use = append(rep.Use, contracts.LimitUse{Limit: name, Kind: l.Kind, Key: l.Key, Value: entry.Value,
			Used: entry.Used, Max: l.Max(), Shadow: l.Shadow, Window: entry.Window, Waiting: len(entry.Waiting)})
	}
	return rep, nil
}
