package coordinator

import (
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/lease"
)

// HeaderClusterSecret carries the cluster secret on the calls coordinators make to each other's
// /v1/internal/ endpoints (--cluster-secret-file).
const HeaderClusterSecret = "Retryring-Cluster-Secret"

// PathInternal is the prefix of the endpoints only coordinators may call.
const PathInternal = "/v1/internal/"

// revokedCloseDelay lets the unauthorized error of a revoked stream reach the worker before its
// connection is closed under it.
const revokedCloseDelay = 200 * time.Millisecond

// refusalLogBurst is how many refusals a second are logged: a flood of bad clients must not
// become a flood of log lines (the refusals metric counts them all).
const refusalLogBurst = 10

// startAuth loads the files named in the configuration; an unreadable or invalid file stops the
// node from starting, with one error naming the flag, the file and what is wrong.
func (n *Node) startAuth() error {
	log := n.partLog("auth")
	n.refusalLog = log.Sample(&zerolog.BurstSampler{Burst: refusalLogBurst, Period: time.Second})
	a, err := auth.New(auth.Files{WorkerTokens: n.cfg.WorkerTokensFile, AdminTokens: n.cfg.AdminTokenFile,
		ClusterSecret: n.cfg.ClusterSecretFile}, log)
	if err != nil {
		return err
	}
	n.auth = a
	if !a.HasClusterSecret() && !n.raftTLSEnabled() {
		log.Warn().Str("path", PathInternal).
			Msg("the internal endpoints are open to anyone who reaches the admin port: set --cluster-secret-file or Raft TLS")
	}
	if !a.ChecksWorkers() {
		log.Info().Msg("no --worker-tokens: every worker is admitted")
	}
	if !a.ChecksAdmins() {
		log.Info().Msg("no --admin-token-file: mutating admin calls need no token")
	}
	return nil
}

// stillAuthorized checks a connection's token again before a lease element or an answer.
func (n *Node) stillAuthorized(c *workerConn) error {
	return n.auth.StillAdmitted(c.setup.Ring(), c.admission)
}

// admitSetup is the acceptor's check of a parsed SETUP, before the connection is registered: the
// token (unauthorized), then the SETUP rate (busy). A refused SETUP leaves nothing behind: no
// connection in the registry, no Raft entry, nothing kept per client. It clears the token from s
// so that it is never logged nor shown; the connection keeps its digest.
func (n *Node) admitSetup(s *lease.Setup, sock rsocket.CloseableRSocket) (auth.Admission, error) {
	remote, _ := rsocket.GetAddr(sock)
	adm, err := n.auth.AdmitWorker(*s)
	s.Token = ""
	if err == nil {
		err = n.checkWorkerCertificate(sock, *s)
	}
	if err != nil {
		n.metrics.refused(refusedUnauthorized)
		n.limits.refusedConn(remote)
		return auth.Admission{}, err
	}
	if err := n.limits.admitSetup(n.clock.Now()); err != nil {
		n.metrics.refused(refusedSetupRate)
		n.limits.refusedConn(remote)
		return auth.Admission{}, err
	}
	n.limits.setupDone(remote)
	return adm, nil
}

// revoked ends a lease stream whose token was revoked: the error goes out, and the connection is
// closed a moment later (the worker goes down as after any disconnect).
func (s *leaseStream) revoked(err error) {
	s.log.Warn().Str("token_name", s.conn.admission.TokenName).Msg("token revoked: ending the lease stream and the connection")
	s.n.metrics.refused(refusedRevoked)
	time.AfterFunc(revokedCloseDelay, s.conn.close)
}

// authorizeHTTP is the admin HTTP edge: /v1/internal/ is for coordinators only (the cluster
// secret, or a client certificate of the Raft CA); every other call that is not GET or HEAD
// changes something and needs the admin bearer token. It answers 401 itself and reports false
// when the call must go no further. A follower checks before it forwards the call (with the
// header: the leader checks again).
func (n *Node) authorizeHTTP(w http.ResponseWriter, r *http.Request) bool {
	a := n.auth
	if strings.HasPrefix(r.URL.Path, PathInternal) {
		if !a.HasClusterSecret() && !n.raftTLSEnabled() {
			return true
		}
		if a.ClusterSecretSent(r.Header.Get(HeaderClusterSecret)) || n.raftPeerVerified(r) {
			return true
		}
		n.metrics.refused(refusedInternal)
		n.refusalLog.Warn().Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Msg("internal call refused: neither the cluster secret nor a Raft certificate")
		admin.WriteUnauthorized(w, "only coordinators may call "+PathInternal+"* (cluster secret or Raft TLS client certificate)")
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	refusal := a.Admin(r.Header.Get("Authorization"))
	if refusal == nil {
		return true
	}
	n.metrics.refused(refusedAdmin)
	// The client reads what it must send; this node's log names the file that decides.
	n.refusalLog.Info().Str("remote", r.RemoteAddr).Str("method", r.Method).Str("path", r.URL.Path).Str("reason", refusal.Reason).
		Msg("admin call refused: " + refusal.Reason)
	admin.WriteUnauthorized(w, refusal.Message)
	return false
}

// signInternal adds this node's credentials to a call to another coordinator's /v1/internal/
// endpoint (a Raft TLS client certificate goes with the transport instead).
func (n *Node) signInternal(req *http.Request) {
	if secret := n.auth.ClusterSecret(); secret != "" {
		req.Header.Set(HeaderClusterSecret, secret)
	}
}
