package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// Timeouts of one ctl call: a read answers from the node asked; a mutation may be forwarded by a
// follower to the leader, which commits it; a step-down waits for the new leader.
const (
	ctlReadTimeout     = 10 * time.Second
	ctlMutationTimeout = 15 * time.Second
	ctlStepDownTimeout = 30 * time.Second
)

// adminTokenEnv is the environment variable of ctl's --token-file.
const adminTokenEnv = "RETRYRING_ADMIN_TOKEN_FILE"

// maxCtlAnswer bounds an answer the CLI reads (a ring view of thousands of members fits).
const maxCtlAnswer = 16 << 20

// ctlConn holds the flags every ctl command takes to reach a coordinator (--coordinator,
// --token-file, --ca, --cert, --key, -o) and, once connect ran, the HTTP client they make. Every
// ctl command goes through it: ctlCommand registers the flags and connects before run.
type ctlConn struct {
	coordinator string
	tokenFile   string
	ca          string
	cert        string
	key         string
	output      string

	base   string // scheme://host:port, no trailing slash
	token  string
	client *http.Client
}

func (c *ctlConn) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.coordinator, "coordinator", "http://127.0.0.1:7480", "admin HTTP address of any coordinator: http://HOST:PORT, https://HOST:PORT, or HOST:PORT (https when --ca, --cert or --key is given); a follower forwards a change to the leader")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the admin token, sent as Authorization: Bearer on every call")
	fs.StringVar(&c.ca, "ca", "", "PEM file of the CA that signed the coordinator's certificate (https; default: the system's roots)")
	fs.StringVar(&c.cert, "cert", "", "PEM client certificate, for a coordinator that asks for one (with --key)")
	fs.StringVar(&c.key, "key", "", "PEM key of --cert")
	fs.StringVarP(&c.output, "output", "o", "table", "output: table or json (the coordinator's answer as it is)")
}

// connect checks the flags and builds the client: one line naming the flag for anything wrong.
func (c *ctlConn) connect() error {
	if c.output != "table" && c.output != "json" {
		return fmt.Errorf("-o: want table or json, got %q", c.output)
	}
	files := tlsfiles.Files{Cert: c.cert, Key: c.key, CA: c.ca}
	addr := c.coordinator
	if !strings.Contains(addr, "://") {
		// HOST:PORT alone: TLS flags say the coordinator speaks https, as an operator who gave
		// them means; without them, plain http (the default coordinator's).
		scheme := "http://"
		if files.Enabled() {
			scheme = "https://"
		}
		addr = scheme + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("--coordinator %q: want HOST:PORT, http://HOST:PORT or https://HOST:PORT", c.coordinator)
	}
	c.base = u.Scheme + "://" + u.Host
	transport := http.DefaultTransport.(*http.Transport).Clone()
	switch {
	case u.Scheme == "http" && files.Enabled():
		return fmt.Errorf("--ca, --cert and --key are for an https:// coordinator, and --coordinator is %s: write https://%s (or leave the scheme out)", c.base, u.Host)
	case u.Scheme == "https":
		cfg, err := tlsfiles.Client(files, "", nil)
		if err != nil {
			return fmt.Errorf("--ca/--cert/--key: %w", err)
		}
		transport.TLSClientConfig = cfg
	}
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
		if c.token == "" || strings.ContainsAny(c.token, "\r\n") {
			return fmt.Errorf("--token-file %s: want one token on one line", c.tokenFile)
		}
	}
	// No redirects: the coordinators never send one, and following one to another host would
	// drop the Authorization header.
	c.client = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return nil
}

// get fetches path and returns the body of a 200 answer.
func (c *ctlConn) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ctlReadTimeout)
	defer cancel()
	return c.do(ctx, http.MethodGet, path, nil)
}

// post sends body as JSON to path and returns the body of a 200 answer; timeout bounds the call
// (ctlMutationTimeout for a committed change).
func (c *ctlConn) post(ctx context.Context, path string, body any, timeout time.Duration) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.do(ctx, http.MethodPost, path, data)
}

func (c *ctlConn) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if c.client == nil {
		return nil, errors.New("ctl: connect was not called")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.unreachable(unwrapURLError(err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxCtlAnswer))
	if err != nil {
		return nil, fmt.Errorf("coordinator at %s: reading the answer: %w", c.base, err)
	}
	if resp.StatusCode == http.StatusOK {
		return answer, nil
	}
	msg := strings.TrimSpace(string(answer))
	var we lease.WireError
	if json.Unmarshal(answer, &we) == nil && we.Code != "" {
		msg = we.Code + ": " + we.Message
	}
	if msg == "" {
		msg = "(no body)"
	}
	hint := ""
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		// What this side must do; the coordinator's log says which of its files decided.
		if c.token == "" {
			hint = ": pass --token-file FILE (or set " + adminTokenEnv + ") with an admin token"
		} else {
			hint = ": check the admin token in --token-file " + c.tokenFile
		}
	}
	return nil, fmt.Errorf("coordinator answered %s: %s%s", resp.Status, strings.ReplaceAll(msg, "\n", " "), hint)
}

// unreachable is the error of a call that got no answer, saying what to change where the cause
// is on this side: a client certificate the coordinator refused, or its certificate not trusted.
func (c *ctlConn) unreachable(err error) error {
	if reason, required, ok := tlsfiles.CertificateRefusal(err); ok {
		// The TLS alert alone: net/http may put its own words in front of it depending on which of
		// its goroutines read the alert first ("readLoopPeekFailLocked: ...").
		var alert *net.OpError
		if errors.As(err, &alert) {
			err = alert
		}
		if required {
			return fmt.Errorf("coordinator at %s requires a client certificate: give --cert and --key (%w)", c.base, err)
		}
		return fmt.Errorf("coordinator at %s refused the client certificate of --cert %s: %s; give --cert and --key a certificate of the CA it trusts for clients (%w)",
			c.base, c.cert, reason, err)
	}
	var unknownCA x509.UnknownAuthorityError
	if errors.As(err, &unknownCA) {
		flag := "give --ca with the CA that signed it"
		if c.ca != "" {
			flag = "--ca " + c.ca + " did not sign it"
		}
		return fmt.Errorf("coordinator unreachable at %s: %w (%s)", c.base, err, flag)
	}
	return fmt.Errorf("coordinator unreachable at %s: %w", c.base, err)
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// show writes the answer as it came (-o json) or decodes it into a value of T and prints it with
// table.
func show[T any](cmd *cobra.Command, c *ctlConn, answer []byte, what string, table func(io.Writer, T) error) error {
	if c.output == "json" {
		_, err := cmd.OutOrStdout().Write(answer)
		return err
	}
	var v T
	if err := json.Unmarshal(answer, &v); err != nil {
		return fmt.Errorf("coordinator at %s answered something that is not %s: %w", c.base, what, err)
	}
	return table(cmd.OutOrStdout(), v)
}

// ctlCommand builds a ctl subcommand: the connection flags (ctlConn), those flags adds, the
// environment (bindEnv), and run, called once the flags are checked and the client built.
func ctlCommand(use, short, long string, args cobra.PositionalArgs, flags func(fs *pflag.FlagSet),
	run func(cmd *cobra.Command, c *ctlConn, args []string) error) *cobra.Command {
	c := &ctlConn{}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, os.LookupEnv); err != nil {
				return err
			}
			return c.connect()
		},
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd, c, args) },
	}
	c.register(cmd.Flags())
	// RETRYRING_TOKEN_FILE is the worker's ring token; ctl read it for the admin token until it
	// had a variable of its own.
	setEnv(cmd, "token-file", adminTokenEnv, "RETRYRING_TOKEN_FILE")
	if flags != nil {
		flags(cmd.Flags())
	}
	annotateEnv(cmd)
	return cmd
}
