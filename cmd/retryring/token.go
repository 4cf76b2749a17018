package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/lease"
)

// newTokenCommand makes and hashes the tokens of --worker-tokens and --admin-token-file. The
// files hold hashes only: the token itself is shown once, to be handed to the workers (or the
// operator) through a Secret.
func newTokenCommand() *cobra.Command {
	root := &cobra.Command{Use: "token", Short: "Make and hash worker and admin tokens"}
	var ring, name, out, appendTo string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh random token and its line for the tokens file",
		Long: `Print a fresh random token (256 random bits) and the line that admits it.
With --ring REGION/CLUSTER/SERVICE the line goes in the coordinators' --worker-tokens file and the
token to that ring's workers (--token-file or RETRYRING_TOKEN); without --ring it is an admin token:
the line goes in --admin-token-file and the token to the operator (ctl --token-file).
The token is shown once; the file keeps only its SHA-256. --out writes the token to a new file and
--append-to adds the line to a tokens file, so that neither has to be cut out of the output:
  retryring token new --ring eu/prod/orders --out orders.token --append-to worker-tokens.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, token, err := newTokenLine(ring, name, rand.Reader)
			if err != nil {
				return err
			}
			return saveToken(cmd.OutOrStdout(), token, line, out, appendTo)
		},
	}
	newCmd.Flags().StringVar(&ring, "ring", "", "REGION/CLUSTER/SERVICE of a worker token; empty: an admin token")
	newCmd.Flags().StringVar(&name, "name", "", "a name for people and logs (e.g. orders-2026-12), kept in the line")
	newCmd.Flags().StringVar(&out, "out", "", "write the token to this new file (mode 0600) instead of printing it; an existing file is refused")
	newCmd.Flags().StringVar(&appendTo, "append-to", "", "append the token's line to this tokens file (created with mode 0600 if missing) instead of printing it")
	hashCmd := &cobra.Command{
		Use:   "hash",
		Short: "Read one token from stdin and print its entry (sha256:<hex>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := readToken(cmd.InOrStdin(), "stdin")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), auth.HashToken(token))
			return nil
		},
	}
	root.AddCommand(newCmd, hashCmd)
	return root
}

// saveToken prints the token and its line on w, or writes the token to a new file (out) and
// appends the line to a tokens file (appendTo), saying on w where each went.
func saveToken(w io.Writer, token, line, out, appendTo string) error {
	if out != "" && out == appendTo {
		return fmt.Errorf("--out and --append-to name the same file %s: the token and the line that admits it go to different places", out)
	}
	if out != "" {
		// O_EXCL: a token is shown once, so writing over a file would lose the one it holds.
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("--out %s exists: it may hold a token in use; remove it or name a new file", out)
		}
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if _, err := fmt.Fprintln(f, token); err != nil {
			_ = f.Close()
			return fmt.Errorf("--out %s: %w", out, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--out %s: %w", out, err)
		}
		fmt.Fprintf(w, "# token written to %s (mode 0600)\n", out)
	} else {
		fmt.Fprintln(w, "# token (shown once):")
		fmt.Fprintln(w, token)
	}
	if appendTo != "" {
		f, err := os.OpenFile(appendTo, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("--append-to: %w", err)
		}
		if _, err := fmt.Fprintln(f, line); err != nil {
			_ = f.Close()
			return fmt.Errorf("--append-to %s: %w", appendTo, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--append-to %s: %w", appendTo, err)
		}
		fmt.Fprintf(w, "# line appended to %s\n", appendTo)
		return nil
	}
	fmt.Fprintln(w, "# line for the tokens file:")
	fmt.Fprintln(w, line)
	return nil
}

// newTokenLine draws a token from rnd and returns its tokens-file line and the token.
func newTokenLine(ring, name string, rnd io.Reader) (line, token string, err error) {
	if ring != "" {
		if _, err := lease.ParseRing(ring); err != nil {
			return "", "", fmt.Errorf("--ring: %w", err)
		}
	}
	var b [32]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", "", fmt.Errorf("drawing a token: %w", err)
	}
	token = hex.EncodeToString(b[:])
	return auth.EntryLine(ring, token, name), token, nil
}

// readToken reads a token: the first line of r, surrounding blanks trimmed.
func readToken(r io.Reader, what string) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the token from %s: %w", what, err)
	}
	token := strings.TrimSpace(line)
	if err := auth.CheckToken(token); err != nil {
		return "", fmt.Errorf("the token from %s: %w", what, err)
	}
	return token, nil
}

// workerTokenFrom is the worker's token: the file of --token-file, else RETRYRING_TOKEN, else none.
func workerTokenFrom(file string, lookup func(string) (string, bool)) (string, error) {
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		defer f.Close()
		return readToken(f, "--token-file "+file)
	}
	if v, ok := lookup("RETRYRING_TOKEN"); ok && v != "" {
		return readToken(strings.NewReader(v), "RETRYRING_TOKEN")
	}
	return "", nil
}
