package coordinator

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/lease"
)

// HeaderClusterSecret carries the cluster secret on the calls coordinators make to each other's
// /v1/internal/ endpoints (--cluster-secret-file).
const HeaderClusterSecret = "Retryring-Cluster-Secret"

// PathInternal is the prefix of the endpoints only coordinators may call.
const PathInternal = "/v1/internal/"

// authReloadPeriod is how often the token and secret files are re-read.
const authReloadPeriod = time.Second

// revokedCloseDelay lets the unauthorized error of a revoked stream reach the worker before its
// connection is closed under it.
const revokedCloseDelay = 200 * time.Millisecond

// authenticator holds the node's credentials: each part is nil when its flag is not set, and then
// that check admits everyone (today's behaviour).
type authenticator struct {
	workers *watchedFile[workerTokens]
	admins  *watchedFile[adminTokens]
	secret  *watchedFile[clusterSecret]
	// refusalLog logs refusals at most refusalLogBurst a second: a flood of bad clients must not
	// become a flood of log lines (the refusals metric counts them all).
	refusalLog zerolog.Logger
}

// refusalLogBurst is how many refusals a second are logged.
const refusalLogBurst = 10

// admission is what a worker connection was admitted with: the digest of its token (never the
// token), kept to check it again before every lease element.
type admission struct {
	digest    tokenDigest
	tokenName string
}

// startAuth loads the files named in the configuration; an unreadable or invalid file stops the
// node from starting, with one error naming the flag, the file and what is wrong.
func (n *Node) startAuth() error {
	log := n.partLog("auth")
	a := &authenticator{refusalLog: log.Sample(&zerolog.BurstSampler{Burst: refusalLogBurst, Period: time.Second})}
	if p := n.cfg.WorkerTokensFile; p != "" {
		a.workers = &watchedFile[workerTokens]{what: "--worker-tokens", path: p, parse: parseWorkerTokens, log: log,
			summary: (*workerTokens).summary}
	}
	if p := n.cfg.AdminTokenFile; p != "" {
		a.admins = &watchedFile[adminTokens]{what: "--admin-token-file", path: p, parse: parseAdminTokens, log: log,
			summary: (*adminTokens).summary}
	}
	if p := n.cfg.ClusterSecretFile; p != "" {
		a.secret = &watchedFile[clusterSecret]{what: "--cluster-secret-file", path: p, parse: parseClusterSecret, log: log,
			summary: func(*clusterSecret) string { return "the cluster secret" }}
	}
	for _, err := range []error{loadIf(a.workers), loadIf(a.admins), loadIf(a.secret)} {
		if err != nil {
			return err
		}
	}
	n.auth = a
	if a.secret == nil && !n.raftTLSEnabled() {
		log.Warn().Str("path", PathInternal).
			Msg("the internal endpoints are open to anyone who reaches the admin port: set --cluster-secret-file or Raft TLS")
	}
	if a.workers == nil {
		log.Info().Msg("no --worker-tokens: every worker is admitted")
	}
	if a.admins == nil {
		log.Info().Msg("no --admin-token-file: mutating admin calls need no token")
	}
	return nil
}

func loadIf[T any](w *watchedFile[T]) error {
	if w == nil {
		return nil
	}
	return w.load()
}

// watchAuth re-reads the files every authReloadPeriod until the node stops.
func (n *Node) watchAuth() {
	a := n.auth
	if a.workers == nil && a.admins == nil && a.secret == nil {
		return
	}
	tick := time.NewTicker(authReloadPeriod)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
			a.reload()
		}
	}
}

// reload re-reads every file once (a failure is logged and keeps the last good content).
func (a *authenticator) reload() {
	if a.workers != nil {
		_ = a.workers.check()
	}
	if a.admins != nil {
		_ = a.admins.check()
	}
	if a.secret != nil {
		_ = a.secret.check()
	}
}

// workerToken checks a SETUP's token against the tokens of its ring.
func (a *authenticator) workerToken(s lease.Setup) (admission, error) {
	if a == nil || a.workers == nil {
		return admission{}, nil
	}
	d := digestOf(s.Token)
	if s.Token == "" {
		return admission{}, &lease.WireError{Code: lease.CodeUnauthorized, Message: "this coordinator requires a token in SETUP data (\"token\")"}
	}
	name, ok := matchDigest(a.workers.cur.Load().byRing[s.Ring()], d)
	if !ok {
		return admission{}, &lease.WireError{Code: lease.CodeUnauthorized,
			Message: fmt.Sprintf("the token is not valid for ring %s (revoked, mistyped, or another ring's)", s.Ring())}
	}
	return admission{digest: d, tokenName: name}, nil
}

// stillAuthorized checks a connection's token again: a token removed from the file since the
// connection was admitted ends its streams at their next element.
func (a *authenticator) stillAuthorized(c *workerConn) error {
	if a == nil || a.workers == nil {
		return nil
	}
	if _, ok := matchDigest(a.workers.cur.Load().byRing[c.setup.Ring()], c.admission.digest); !ok {
		return &lease.WireError{Code: lease.CodeUnauthorized, Message: fmt.Sprintf("the token of this connection was revoked for ring %s", c.setup.Ring())}
	}
	return nil
}

// admitSetup is the acceptor's check of a parsed SETUP, before the connection is registered: the
// token (unauthorized), then the SETUP rate (busy). A refused SETUP leaves nothing behind: no
// connection in the registry, no Raft entry, nothing kept per client. It clears the token from s
// so that it is never logged nor shown; the connection keeps its digest.
func (n *Node) admitSetup(s *lease.Setup, sock rsocket.CloseableRSocket) (admission, error) {
	remote, _ := rsocket.GetAddr(sock)
	adm, err := n.auth.workerToken(*s)
	s.Token = ""
	if err == nil {
		err = n.checkWorkerCertificate(sock, *s)
	}
	if err != nil {
		n.metrics.refused(refusedUnauthorized)
		n.limits.refusedConn(remote)
		return admission{}, err
	}
	if err := n.limits.admitSetup(n.clock.Now()); err != nil {
		n.metrics.refused(refusedSetupRate)
		n.limits.refusedConn(remote)
		return admission{}, err
	}
	n.limits.setupDone(remote)
	return adm, nil
}

// revoked ends a lease stream whose token was revoked: the error goes out, and the connection is
// closed a moment later (the worker goes down as after any disconnect).
func (s *leaseStream) revoked(err error) {
	s.log.Warn().Str("token_name", s.conn.admission.tokenName).Msg("token revoked: ending the lease stream and the connection")
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
		if a.secret == nil && !n.raftTLSEnabled() {
			return true
		}
		if a.secret != nil {
			got := digestOf(r.Header.Get(HeaderClusterSecret))
			want := a.secret.cur.Load().digest
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				return true
			}
		}
		if n.raftPeerVerified(r) {
			return true
		}
		n.metrics.refused(refusedInternal)
		a.refusalLog.Warn().Str("remote", r.RemoteAddr).Str("path", r.URL.Path).Msg("internal call refused: neither the cluster secret nor a Raft certificate")
		writeUnauthorized(w, "only coordinators may call "+PathInternal+"* (cluster secret or Raft TLS client certificate)")
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead || a.admins == nil {
		return true
	}
	// The scheme is case-insensitive (RFC 9110).
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		if _, ok = matchDigest(a.admins.cur.Load().tokens, digestOf(strings.TrimSpace(token))); ok {
			return true
		}
	}
	n.metrics.refused(refusedAdmin)
	// The client reads what it must send; this node's log names the file that decides.
	msg := "this call needs an admin token (Authorization: Bearer <token>)"
	reason := "no bearer token; " + a.admins.what + " requires one for every change"
	if r.Header.Get("Authorization") != "" {
		msg = "the admin token was refused (mistyped, revoked, or not an admin token)"
		reason = "the bearer token is not in " + a.admins.what + " " + a.admins.path
	}
	a.refusalLog.Info().Str("remote", r.RemoteAddr).Str("method", r.Method).Str("path", r.URL.Path).Str("reason", reason).
		Msg("admin call refused: " + reason)
	writeUnauthorized(w, msg)
	return false
}

func writeUnauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="retryring"`)
	writeJSON(w, http.StatusUnauthorized, lease.WireError{Code: lease.CodeUnauthorized, Message: msg})
}

// signInternal adds this node's credentials to a call to another coordinator's /v1/internal/
// endpoint (a Raft TLS client certificate goes with the transport instead).
func (n *Node) signInternal(req *http.Request) {
	if n.auth.secret != nil {
		req.Header.Set(HeaderClusterSecret, n.auth.secret.cur.Load().secret)
	}
}
