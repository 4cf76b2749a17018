package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gocql/gocql"
	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/deadletter"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
)

// deadLetterFlags are the flags every deadletters subcommand shares: where, which ring, which
// dead letters, and how to print them.
type deadLetterFlags struct {
	cf             cassandraFlags
	ring           ringFlags
	since, until   string
	impl, instance []string
	status         []int
	output         string
	// clock is the command's clock: nil for the system clock; tests skew it.
	clock lease.Clock
}

func (d *deadLetterFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	d.cf.register(fs)
	d.ring.register(fs)
	fs.StringVar(&d.since, "since", "720h", "dead letters given up on since: a duration before now (72h) or a time (2026-03-10 or RFC 3339)")
	fs.StringVar(&d.until, "until", "", "... and before: a duration before now or a time; default now")
	fs.StringSliceVar(&d.impl, "impl", nil, "only these step types (stacksaga_impl_type), comma-separated")
	fs.StringSliceVar(&d.instance, "instance", nil, "only these instance ids")
	fs.IntSliceVar(&d.status, "status", nil, "only these last HTTP statuses (0: no answer)")
	fs.StringVarP(&d.output, "output", "o", "table", "table or json")
}

// filter builds the filter at now.
func (d *deadLetterFlags) filter(now time.Time) (deadletter.Filter, error) {
	f := deadletter.Filter{Impl: d.impl, Instance: d.instance, Status: d.status, Until: now}
	var err error
	if f.Since, err = parseWhen(d.since, now); err != nil {
		return f, fmt.Errorf("--since: %w", err)
	}
	if d.until != "" {
		if f.Until, err = parseWhen(d.until, now); err != nil {
			return f, fmt.Errorf("--until: %w", err)
		}
	}
	if d.output != "table" && d.output != "json" {
		return f, fmt.Errorf("-o %q: want table or json", d.output)
	}
	return f, f.Validate()
}

// parseWhen reads a duration before now, a date (UTC midnight) or an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration before now must not be negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (72h) nor a time (2026-03-10, 2026-03-10T12:00:00Z)", s)
}

// now reads the command's clock.
func (d *deadLetterFlags) now() time.Time {
	if d.clock == nil {
		return time.Now()
	}
	return d.clock.Now()
}

// store connects to Cassandra and checks the schema; the store stamps its writes with the
// command's clock. The caller closes the session.
func (d *deadLetterFlags) store(ctx context.Context) (*cassandra.Store, *gocql.Session, error) {
	session, err := d.cf.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := cassandra.CheckSchema(ctx, session, d.cf.keyspace); err != nil {
		session.Close()
		return nil, nil, err
	}
	st, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: d.cf.keyspace, Ring: d.ring.key(), WindowMinutes: d.ring.windowMinutes, Clock: d.clock})
	if err != nil {
		session.Close()
		return nil, nil, err
	}
	return st, session, nil
}

// command finishes a deadletters subcommand: its flags, their environment variables, and the
// environment read before it runs.
func (d *deadLetterFlags) command(cmd *cobra.Command) *cobra.Command {
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error { return bindEnv(cmd, os.LookupEnv) }
	d.register(cmd)
	annotateEnv(cmd)
	return cmd
}

// open builds the filter at now and connects to the store; close ends the session.
func (d *deadLetterFlags) open(ctx context.Context, now time.Time) (deadletter.Filter, *cassandra.Store, func(), error) {
	f, err := d.filter(now)
	if err != nil {
		return f, nil, nil, err
	}
	st, session, err := d.store(ctx)
	if err != nil {
		return f, nil, nil, err
	}
	return f, st, session.Close, nil
}

func newDeadLettersCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "deadletters",
		Short: "List, show, replay and purge the failures retryring gave up on",
		Long: `Dead letters are the steps a worker gave up on: refused for good by the downstream (a 4xx), or out
of attempts. They are kept, by the UTC day they were given up on, until purged. A replay records
them again as fresh retries (replay generation + 1, attempt 0); no older copy of a replayed step
is ever executed again.`,
	}
	root.AddCommand(newDeadLettersList(), newDeadLettersShow(), newDeadLettersReplay(), newDeadLettersPurge())
	return root
}

func newDeadLettersList() *cobra.Command {
	var d deadLetterFlags
	return d.command(&cobra.Command{
		Use:   "list",
		Short: "List dead letters (filters: --since, --until, --impl, --status, --instance)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, st, closeStore, err := d.open(cmd.Context(), time.Now())
			if err != nil {
				return err
			}
			defer closeStore()
			list, err := deadletter.List(cmd.Context(), st, f)
			if err != nil {
				return err
			}
			return printDeadLetters(cmd.OutOrStdout(), d.output, list)
		},
	})
}

func newDeadLettersShow() *cobra.Command {
	var d deadLetterFlags
	return d.command(&cobra.Command{
		Use:   "show TRANSACTION_ID",
		Short: "Show the dead letters of one transaction and the markers of its steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, st, closeStore, err := d.open(cmd.Context(), time.Now())
			if err != nil {
				return err
			}
			defer closeStore()
			all, err := deadletter.List(cmd.Context(), st, f)
			if err != nil {
				return err
			}
			type shown struct {
				cassandra.DeadLetter
				Marker cassandra.Marker `json:"marker"`
			}
			var out []shown
			for _, dl := range all {
				if dl.Transaction.ID != args[0] {
					continue
				}
				m, _, err := st.Marker(cmd.Context(), dl.Transaction.ID, dl.Transaction.ImplType)
				if err != nil {
					return err
				}
				out = append(out, shown{dl, m})
			}
			if len(out) == 0 {
				return fmt.Errorf("no dead letter of transaction %q between %s and %s (widen --since)", args[0], f.Since.UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339))
			}
			if d.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
			}
			w := cmd.OutOrStdout()
			for _, s := range out {
				fmt.Fprintf(w, "transaction   %s\nstep          %s (replay generation %d)\ninstance      %s\nwindow        %s bucket %d\n",
					s.Transaction.ID, s.Transaction.ImplType, s.Transaction.Replay, s.Bucket.InstanceID, s.Bucket.Window, s.Bucket.Bucket)
				fmt.Fprintf(w, "given up      %s by %s after %d attempts\nlast answer   %d %s\n",
					s.DeadAt.UTC().Format(time.RFC3339), s.WorkerID, s.Transaction.Attempt, s.LastStatus, s.LastError)
				replayed := "no"
				if s.ReplayedBy != "" {
					replayed = fmt.Sprintf("by %s at %s", s.ReplayedBy, s.ReplayedAt.UTC().Format(time.RFC3339))
				}
				floor := "none"
				if s.Marker.HasFloor {
					floor = s.Marker.Floor.String()
				}
				fmt.Fprintf(w, "replayed      %s\nmarker        %s, floor %s\n\n", replayed, orDash(s.Marker.State), floor)
			}
			return nil
		},
	})
}

func newDeadLettersReplay() *cobra.Command { return deadLettersReplayCommand(nil) }

// deadLettersReplayCommand is `deadletters replay` on clock (nil: the system clock).
func deadLettersReplayCommand(clock lease.Clock) *cobra.Command {
	d := deadLetterFlags{clock: clock}
	var o deadletter.ReplayOptions
	var maxClockOffset time.Duration
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Record the matching dead letters again as fresh retries (a snapshot, idempotent by --id)",
		Long: `Replay lists the matching dead letters first (a snapshot: what fails again during the run is not
replayed again), then records each again, under its own instance id, at replay generation + 1 and
attempt 0, through the normal write path, and marks it replayed. A statement that fails
transiently (a timeout, too few replicas) is tried again with backoff, up to --tries times; a mark
whose compare-and-set timed out is read back at the serial level first. The replay stops only on a
statement that keeps failing, naming the dead letter and how many are left. Running the same --id
again replays nothing new, and completes a run that stopped. --dry-run lists what would be replayed
and writes nothing. Before anything, the replay measures this host's clock against Cassandra's
and refuses, with the figures, when it is beyond half of --max-clock-offset: a copy stamped by such a
clock could be hidden by a worker's delete while its dead letter reads replayed. It keeps measuring,
and stops on the first dead letter it would record while the clock is untrusted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := d.filter(d.now())
			if err != nil {
				return err
			}
			if o.ID == "" && !o.DryRun {
				return fmt.Errorf("--id is required (name the replay, e.g. --id incident-42, so that running it again replays nothing new)")
			}
			if o.ID == "" {
				o.ID = "dry-run"
			}
			st, session, err := d.store(cmd.Context())
			if err != nil {
				return err
			}
			defer session.Close()
			clock := d.clock
			if clock == nil {
				clock = lease.SystemClock{}
			}
			mon, stopMon, err := checkedClock(cmd.Context(), session, clock, maxClockOffset, "deadletters replay", "nothing replayed")
			if err != nil {
				return err
			}
			defer stopMon()
			rec, err := recorder.New(st, recorder.Config{InstanceID: "retryring-deadletters", Clock: clock, ClockCheck: mon, AllowWeakConsistency: d.cf.allowWeak})
			if err != nil {
				return err
			}
			o.Now = clock.Now
			return runReplay(cmd.Context(), cmd.OutOrStdout(), st, rec, f, o, d.output)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.ID, "id", "", "name of this replay (required): running the same id again replays nothing new")
	fs.Float64Var(&o.Rate, "rate", 100, "dead letters replayed per second at most (0: no limit)")
	fs.IntVar(&o.Concurrency, "concurrency", deadletter.DefaultConcurrency, "dead letters replayed at once")
	fs.IntVar(&o.Tries, "tries", deadletter.DefaultTries, "tries of one statement that fails transiently (a timeout, too few replicas, an overloaded node), with backoff, before the replay stops on it")
	fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be replayed; write nothing")
	fs.DurationVar(&maxClockOffset, "max-clock-offset", clockcheck.DefaultMaxClockOffset, "bound on the offset between any two processes' clocks: the replay records only while this host's is within half of it from Cassandra's")
	return d.command(cmd)
}

func runReplay(ctx context.Context, w io.Writer, st *cassandra.Store, rec *recorder.Recorder, f deadletter.Filter, o deadletter.ReplayOptions, output string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if output == "table" {
		fmt.Fprintln(tw, "TRANSACTION\tSTEP\tINSTANCE\tGIVEN UP\tOUTCOME\tWINDOW")
	}
	enc := json.NewEncoder(w)
	o.Each = func(d cassandra.DeadLetter, out deadletter.Outcome, key cassandra.BucketKey) {
		where := ""
		if out == deadletter.Replayed || out == deadletter.Unmarked {
			where = key.Window.String()
		}
		if output == "json" {
			_ = enc.Encode(map[string]any{"transaction_id": d.Transaction.ID, "impl_type": d.Transaction.ImplType,
				"instance_id": d.Bucket.InstanceID, "dead_at": d.DeadAt, "outcome": out, "window": where})
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Transaction.ID, d.Transaction.ImplType, d.Bucket.InstanceID,
			d.DeadAt.UTC().Format(time.RFC3339), out, orDash(where))
	}
	res, err := deadletter.Replay(ctx, st, rec, f, o)
	_ = tw.Flush()
	verb := "replayed"
	if o.DryRun {
		verb = "would replay"
	}
	summary := fmt.Sprintf("%s %d of %d matching dead letters (given up on before %s); %d replayed before, %d already done, %d superseded by a newer copy (not copied again)",
		verb, res.Replayed, res.Matched, res.Started.UTC().Format(time.RFC3339), res.AlreadyReplayed, res.AlreadyDone, res.Superseded)
	if res.Unmarked > 0 {
		summary += fmt.Sprintf("; %d copied but not marked: the dead letter was purged or given up on again meanwhile", res.Unmarked)
	}
	if res.Retried > 0 {
		summary += fmt.Sprintf("; %d statements tried again after a transient failure (%d marks whose outcome a timeout left unknown read back at the serial level)", res.Retried, res.Settled)
	}
	if res.Matched == 0 && err == nil {
		summary = "no dead letter matches these filters: nothing to replay"
	}
	if output == "json" {
		fmt.Fprintln(os.Stderr, summary)
	} else {
		fmt.Fprintln(w, summary)
	}
	return err
}

func newDeadLettersPurge() *cobra.Command {
	var d deadLetterFlags
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "purge --older-than DURATION",
		Short: "Delete dead letters given up on longer ago than --older-than (by day partition where possible)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan <= 0 {
				return fmt.Errorf("--older-than is required and must be positive (e.g. --older-than 720h)")
			}
			now := time.Now()
			d.until = now.Add(-olderThan).UTC().Format(time.RFC3339Nano)
			if !cmd.Flags().Changed("since") {
				d.since = "87600h" // ten years: purge looks back far unless told otherwise
			}
			f, err := d.filter(now)
			if err != nil {
				return err
			}
			st, session, err := d.store(cmd.Context())
			if err != nil {
				return err
			}
			defer session.Close()
			n, err := deadletter.Purge(cmd.Context(), st, f)
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d dead letters given up on before %s\n", n, f.Until.UTC().Format(time.RFC3339))
			return err
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "delete dead letters given up on longer ago than this (required)")
	return d.command(cmd)
}

func printDeadLetters(w io.Writer, output string, list []cassandra.DeadLetter) error {
	if output == "json" {
		if list == nil {
			list = []cassandra.DeadLetter{}
		}
		return json.NewEncoder(w).Encode(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no dead letters match")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GIVEN UP\tTRANSACTION\tSTEP\tINSTANCE\tATTEMPTS\tSTATUS\tREPLAYED\tLAST ERROR")
	for _, d := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.DeadAt.UTC().Format(time.RFC3339), d.Transaction.ID,
			d.Transaction.ImplType, d.Bucket.InstanceID, d.Transaction.Attempt, d.LastStatus, orDash(d.ReplayedBy), clip(d.LastError, 60))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
