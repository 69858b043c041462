package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/awaken-dev/awaken/internal/policybacktest"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// maxPolicyTestBody bounds the body of POST /v1/policy/test: a host configuration is
// text, and 1 MiB holds the largest policy (1,024 rules of 1 KiB patterns) besides tools.
const maxPolicyTestBody = 1 << 20

// PolicyTest runs a backtest of req over this deployment (POST /v1/policy/test). One runs
// at a time (each reads the audit history); another is refused unavailable meanwhile.
func (s *Service) PolicyTest(ctx context.Context, req httpapi.PolicyTestRequest) (httpapi.PolicyTestReport, error) {
	release, err := s.policyTests.take("a policy test is already running; try again when it ends")
	if err != nil {
		return httpapi.PolicyTestReport{}, err
	}
	defer release()
	cand, err := policybacktest.ParseConfig(req.Config)
	if err != nil {
		return httpapi.PolicyTestReport{}, err
	}
	pt := policybacktest.New(s.env.StreamReader(), s.env.Names, s.env.Runs, s.env.Batches, s.env.Config.Annotations)
	rep, err := pt.Run(ctx, cand, req)
	if err != nil {
		var e *httpapi.Error
		if errors.As(err, &e) {
			return httpapi.PolicyTestReport{}, e
		}
		return httpapi.PolicyTestReport{}, internalErr(err)
	}
	return rep, nil
}

// httpPolicyTest serves POST /v1/policy/test.
func (s *Service) httpPolicyTest(w http.ResponseWriter, r *http.Request) {
	var req httpapi.PolicyTestRequest
	if err := readBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.PolicyTest(r.Context(), req)
	s.reply(w, r, rep, err)
}
