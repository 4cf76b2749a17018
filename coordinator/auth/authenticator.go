package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// ReloadPeriod is how often Run re-reads the token and secret files.
const ReloadPeriod = time.Second

// Files names the credential files of a coordinator; an empty path turns that check off.
type Files struct {
	WorkerTokens  string // --worker-tokens
	AdminTokens   string // --admin-token-file
	ClusterSecret string // --cluster-secret-file
}

// Authenticator holds a coordinator's credentials: each part is nil when its file is not given,
// and then that check admits everyone.
type Authenticator struct {
	workers *watchedFile[WorkerTokens]
	admins  *watchedFile[AdminTokens]
	secret  *watchedFile[ClusterSecret]
}

// Admission is what a worker connection was admitted with: the digest of its token (never the
// token), kept to check it again before every lease element, and the token's name for logs.
type Admission struct {
	Digest    Digest
	TokenName string
}

// New loads the files; an unreadable or invalid file is an error (wrapping ErrBadFile) naming the
// flag, the file and what is wrong. log receives one line per load, reload and failed reload.
func New(files Files, log zerolog.Logger) (*Authenticator, error) {
	a := &Authenticator{}
	if p := files.WorkerTokens; p != "" {
		a.workers = &watchedFile[WorkerTokens]{what: "--worker-tokens", path: p, parse: ParseWorkerTokens, log: log,
			summary: (*WorkerTokens).summary}
	}
	if p := files.AdminTokens; p != "" {
		a.admins = &watchedFile[AdminTokens]{what: "--admin-token-file", path: p, parse: ParseAdminTokens, log: log,
			summary: (*AdminTokens).summary}
	}
	if p := files.ClusterSecret; p != "" {
		a.secret = &watchedFile[ClusterSecret]{what: "--cluster-secret-file", path: p, parse: ParseClusterSecret, log: log,
			summary: func(*ClusterSecret) string { return "the cluster secret" }}
	}
	for _, err := range []error{loadIf(a.workers), loadIf(a.admins), loadIf(a.secret)} {
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

func loadIf[T any](w *watchedFile[T]) error {
	if w == nil {
		return nil
	}
	return w.load()
}

// ChecksWorkers, ChecksAdmins and HasClusterSecret say which files were given.
func (a *Authenticator) ChecksWorkers() bool    { return a != nil && a.workers != nil }
func (a *Authenticator) ChecksAdmins() bool     { return a != nil && a.admins != nil }
func (a *Authenticator) HasClusterSecret() bool { return a != nil && a.secret != nil }

// Run re-reads the files every ReloadPeriod until stop is closed (Kubernetes updates a mounted
// Secret in place). It returns at once when no file was given.
func (a *Authenticator) Run(stop <-chan struct{}) {
	if a == nil || (a.workers == nil && a.admins == nil && a.secret == nil) {
		return
	}
	tick := time.NewTicker(ReloadPeriod)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			_ = a.Reload() // logged by the file that failed
		}
	}
}

// Reload re-reads every file once. A file that cannot be used is logged, keeps its last good
// content, and is among the errors returned (joined).
func (a *Authenticator) Reload() error {
	var errs []error
	if a.workers != nil {
		errs = append(errs, a.workers.check())
	}
	if a.admins != nil {
		errs = append(errs, a.admins.check())
	}
	if a.secret != nil {
		errs = append(errs, a.secret.check())
	}
	return errors.Join(errs...)
}

// AdmitWorker checks a SETUP's token against the tokens of its ring. Its refusal is the wire
// error the worker reads.
func (a *Authenticator) AdmitWorker(s lease.Setup) (Admission, error) {
	if !a.ChecksWorkers() {
		return Admission{}, nil
	}
	d := DigestOf(s.Token)
	if s.Token == "" {
		return Admission{}, &lease.WireError{Code: lease.CodeUnauthorized, Message: "this coordinator requires a token in SETUP data (\"token\")"}
	}
	name, ok := a.workers.cur.Load().Match(s.Ring(), d)
	if !ok {
		return Admission{}, &lease.WireError{Code: lease.CodeUnauthorized,
			Message: fmt.Sprintf("the token is not valid for ring %s (revoked, mistyped, or another ring's)", s.Ring())}
	}
	return Admission{Digest: d, TokenName: name}, nil
}

// StillAdmitted checks an admitted connection's token again: a token removed from the file since
// the connection was admitted ends its streams at their next element.
func (a *Authenticator) StillAdmitted(ring lease.RingKey, adm Admission) error {
	if !a.ChecksWorkers() {
		return nil
	}
	if _, ok := a.workers.cur.Load().Match(ring, adm.Digest); !ok {
		return &lease.WireError{Code: lease.CodeUnauthorized, Message: fmt.Sprintf("the token of this connection was revoked for ring %s", ring)}
	}
	return nil
}

// ClusterSecretSent reports whether a call carries the cluster secret (false when there is none).
func (a *Authenticator) ClusterSecretSent(header string) bool {
	return a.HasClusterSecret() && a.secret.cur.Load().Matches(header)
}

// ClusterSecret is the secret this coordinator sends on its calls to the others; "" when none.
func (a *Authenticator) ClusterSecret() string {
	if !a.HasClusterSecret() {
		return ""
	}
	return a.secret.cur.Load().secret
}

// AdminRefusal is why an admin call was refused: Message for the client (what to send), Reason
// for this node's log (which file decides).
type AdminRefusal struct {
	Message, Reason string
}

// Admin checks the Authorization header of a call that changes something; nil admits it.
func (a *Authenticator) Admin(authorization string) *AdminRefusal {
	if !a.ChecksAdmins() {
		return nil
	}
	// The scheme is case-insensitive (RFC 9110).
	scheme, token, ok := strings.Cut(authorization, " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		if _, ok = a.admins.cur.Load().Match(DigestOf(strings.TrimSpace(token))); ok {
			return nil
		}
	}
	if authorization == "" {
		return &AdminRefusal{Message: "this call needs an admin token (Authorization: Bearer <token>)",
			Reason: "no bearer token; " + a.admins.what + " requires one for every change"}
	}
	return &AdminRefusal{Message: "the admin token was refused (mistyped, revoked, or not an admin token)",
		Reason: "the bearer token is not in " + a.admins.what + " " + a.admins.path}
}
