package admin

import (
	"errors"
	"net/http"
)

// PathStepDown hands the lead over: POST StepDownRequest, answers StepDownAnswer. A follower
// forwards it to the leader.
const PathStepDown = "/v1/leader/step-down"

// serveStepDown hands the lead over: a node that is not Raft's leader forwards the call, like
// every call that changes something; the leader transfers the lead (Changer.StepDown) and
// answers once it sees who took over.
func (s *Server) serveStepDown(w http.ResponseWriter, r *http.Request) {
	body, ok := ReadBody(w, r)
	if !ok {
		return
	}
	var req StepDownRequest
	if err := DecodeStrict(body, &req); err != nil {
		WriteError(w, err)
		return
	}
	ans, err := s.changer.StepDown(r.Context(), req.To)
	switch {
	case errors.Is(err, ErrNotLeading):
		s.forward(w, r, body)
		return
	case err != nil:
		WriteError(w, err)
		return
	}
	s.log.Info().Str("to", ans.LeaderID).Int64("took_ms", ans.TookMs).Str("remote", r.RemoteAddr).Msg("stepped down")
	WriteJSON(w, http.StatusOK, ans)
}
