package minicloud

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

func (s *Server) getStats(r *http.Request) (int, any, error) {
	scope := r.URL.Query().Get("scope")
	if scope != "" && scope != "token" {
		return 0, nil, errInvalid("scope %q: want token or nothing", scope)
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	src := &s.stats
	if scope == "token" {
		token, _ := r.Context().Value(tokenKey{}).(string)
		if src = s.byToken[token]; src == nil {
			src = newStats()
		}
	}
	out := *src
	out.Requests = maps.Clone(src.Requests)
	out.ThrottledByOperation = maps.Clone(src.ThrottledByOperation)
	return http.StatusOK, out, nil
}

func (s *Server) resetStatsHandler(*http.Request) (int, any, error) {
	s.resetStats()
	return http.StatusNoContent, nil, nil
}

func (s *Server) getFaults(*http.Request) (int, any, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return http.StatusOK, s.faults, nil
}

func (s *Server) validateFaults(f *api.Faults) error {
	for _, op := range f.Operations {
		if !slices.Contains(s.operations, op) {
			return errInvalid("unknown operation %q (operations: %s)", op, strings.Join(s.operations, ", "))
		}
	}
	return validateFaultRates(f)
}

func validateFaultRates(f *api.Faults) error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.ThrottleRate < 0 || f.ThrottleRate > 1 || f.UnauthorizedRate < 0 || f.UnauthorizedRate > 1 {
		return errInvalid("error_rate, throttle_rate and unauthorized_rate must be between 0 and 1")
	}
	if f.LatencyMS < 0 || f.LatencyMS > 60000 {
		return errInvalid("latency_ms must be between 0 and 60000")
	}
	return nil
}

func (s *Server) putFaults(r *http.Request) (int, any, error) {
	f, _, err := decodeRequest(r, s.validateFaults)
	if err != nil {
		return 0, nil, err
	}
	s.statsMu.Lock()
	s.faults = f
	s.statsMu.Unlock()
	s.log.Info("faults set", "errorRate", f.ErrorRate, "throttleRate", f.ThrottleRate, "unauthorizedRate", f.UnauthorizedRate, "latencyMS", f.LatencyMS, "operations", f.Operations, "holdProvisioning", f.HoldProvisioning)
	return http.StatusOK, f, nil
}
