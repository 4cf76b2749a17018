package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/coordinator"
)

// newTokenCommand makes and hashes the tokens of --worker-tokens and --admin-token-file. The
// files hold hashes only: the token itself is shown once, to be handed to the workers (or the
// operator) through a Secret.
func newTokenCommand() *cobra.Command {
	root := &cobra.Command{Use: "token", Short: "Make and hash worker and admin tokens"}
	var ring, name string
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh random token and its line for the tokens file",
		Long: `Print a fresh random token (256 random bits) and the line that admits it.
With --ring REGION/CLUSTER/SERVICE the line goes in the coordinators' --worker-tokens file and the
token to that ring's workers (--token-file or RETRYRING_TOKEN); without --ring it is an admin token:
the line goes in --admin-token-file and the token to the operator (ctl --token-file).
The token is shown once; the file keeps only its SHA-256.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, token, err := newTokenLine(ring, name, rand.Reader)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintln(w, "# token (shown once):")
			fmt.Fprintln(w, token)
			fmt.Fprintln(w, "# line for the tokens file:")
			fmt.Fprintln(w, line)
			return nil
		},
	}
	newCmd.Flags().StringVar(&ring, "ring", "", "REGION/CLUSTER/SERVICE of a worker token; empty: an admin token")
	newCmd.Flags().StringVar(&name, "name", "", "a name for people and logs (e.g. orders-2026-12), kept in the line")
	hashCmd := &cobra.Command{
		Use:   "hash",
		Short: "Read one token from stdin and print its entry (sha256:<hex>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := readToken(cmd.InOrStdin(), "stdin")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), coordinator.HashToken(token))
			return nil
		},
	}
	root.AddCommand(newCmd, hashCmd)
	return root
}

// newTokenLine draws a token from rnd and returns its tokens-file line and the token.
func newTokenLine(ring, name string, rnd io.Reader) (line, token string, err error) {
	if ring != "" {
		if _, err := coordinator.ParseRing(ring); err != nil {
			return "", "", fmt.Errorf("--ring: %w", err)
		}
	}
	var b [32]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", "", fmt.Errorf("drawing a token: %w", err)
	}
	token = hex.EncodeToString(b[:])
	fields := []string{}
	if ring != "" {
		fields = append(fields, "ring: "+strconv.Quote(ring))
	}
	fields = append(fields, "hash: "+strconv.Quote(coordinator.HashToken(token)))
	if name != "" {
		fields = append(fields, "name: "+strconv.Quote(name))
	}
	return "- {" + strings.Join(fields, ", ") + "}", token, nil
}

// readToken reads a token: the first line of r, surrounding blanks trimmed.
func readToken(r io.Reader, what string) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the token from %s: %w", what, err)
	}
	token := strings.TrimSpace(line)
	if err := coordinator.CheckToken(token); err != nil {
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
