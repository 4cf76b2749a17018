package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// repeatedKeys returns every key that occurs more than once in one object of the JSON value in
// line, as a path ("component", "lease.epoch"). encoding/json keeps the last of repeated keys
// without a word, and some log pipelines refuse such a line, so the value is walked token by
// token with the keys of each object tracked on their own.
func repeatedKeys(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var repeated []string
	if err := walkJSON(dec, "", &repeated); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one JSON value in %q", line)
	}
	return repeated, nil
}

// walkJSON reads one value from dec, appending to repeated the path of every key seen twice in
// one object.
func walkJSON(dec *json.Decoder, path string, repeated *[]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string) // the decoder only returns a string in key position
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] {
				*repeated = append(*repeated, at)
			}
			seen[key] = true
			if err := walkJSON(dec, at, repeated); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if err := walkJSON(dec, path+"[]", repeated); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

func TestRepeatedKeys(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`{"level":"info","component":"a","x":{"component":"b"},"msg":"m"}`, nil},
		{`{"component":"coordinator","component":"leader"}`, []string{"component"}},
		{`{"a":[{"k":1,"k":2},{"k":3}],"b":{"c":{"d":1,"d":2}},"a":0}`, []string{"a[].k", "b.c.d", "a"}},
	} {
		got, err := repeatedKeys([]byte(tc.line))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("repeatedKeys(%s) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	for _, bad := range []string{`{"a":`, `{"a":1}{"b":2}`, `not json`} {
		if _, err := repeatedKeys([]byte(bad)); err == nil {
			t.Errorf("repeatedKeys(%s) accepted it", bad)
		}
	}
}

// logFile is where the subcommands write their logs: zerolog writes each line in one Write, and
// an *os.File takes Writes from several goroutines.
type logFile struct{ *os.File }

// lines are the lines written so far; the last may be partial while the commands run.
func (f logFile) lines(t *testing.T) [][]byte {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// waitFor returns the first line whose message is msg, waiting (bounded) for it to be written.
func (f logFile) waitFor(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range f.lines(t) {
			var v map[string]any
			if json.Unmarshal(line, &v) == nil && v["message"] == msg {
				return v
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line %q within 30s; the logs:\n%s", msg, bytes.Join(f.lines(t), []byte("\n")))
	return nil
}

// runCommand runs the binary's root command with args until ctx ends; the returned function waits
// for it to return and gives its error.
func runCommand(ctx context.Context, args ...string) func() error {
	done := make(chan error, 1)
	go func() {
		root := newRootCommand()
		root.SetArgs(args)
		done <- root.ExecuteContext(ctx)
	}()
	return func() error { return <-done }
}

// TestLogLinesCarryEachKeyOnce runs a coordinator and a worker as the binary does, at debug level,
// through a worker's join, first lease, and leave, and decodes every JSON line they log strictly:
// a key written twice into one line (a field added by a caller and again by the component it
// configures) fails the test.
func TestLogLinesCarryEachKeyOnce(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	logs := logFile{f}
	was := stderr
	stderr = logs
	t.Cleanup(func() { stderr = was; f.Close() })

	coordCtx, stopCoord := context.WithCancel(context.Background())
	defer stopCoord()
	coordDone := runCommand(coordCtx, "coordinator", "--node-id", "c1", "--data-dir", t.TempDir(), "--unsafe-no-sync",
		"--raft-addr", "127.0.0.1:0", "--rsocket-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "debug")
	started := logs.waitFor(t, "coordinator started")
	rsocketAddr, _ := started["rsocket_addr"].(string)

	_, keyspace := storetest.Keyspace(t)
	ring := storetest.Ring(t)
	workerCtx, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	workerDone := runCommand(workerCtx, "worker", "--worker-id", "w1", "--coordinators", rsocketAddr,
		"--cassandra", cassandratest.Addr(), "--keyspace", keyspace,
		"--region", ring.Region, "--cluster", ring.Cluster, "--service", ring.Service,
		"--http-addr", "", "--executor-url", "http://127.0.0.1:1/retry", "--log-level", "debug")
	logs.waitFor(t, "first lease")
	logs.waitFor(t, "worker running")
	stopWorker()
	if err := workerDone(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	logs.waitFor(t, "leave committed")
	stopCoord()
	if err := coordDone(); err != nil {
		t.Fatalf("coordinator: %v", err)
	}

	components := map[string]bool{}
	for _, line := range logs.lines(t) {
		repeated, err := repeatedKeys(line)
		if err != nil {
			t.Errorf("not one JSON value: %v", err)
			continue
		}
		if len(repeated) > 0 {
			t.Errorf("key %s repeated in %s", strings.Join(repeated, ", "), line)
		}
		var v struct{ Component string }
		_ = json.Unmarshal(line, &v)
		components[v.Component] = true
	}
	// The components whose loggers are derived from another's: the check must have seen them log.
	for _, c := range []string{"coordinator", "leader", "raft", "worker_conn", "lease_stream", "leaseclient", "worker"} {
		if !components[c] {
			t.Errorf("no line of component %s was logged", c)
		}
	}
}

// TestRSocketLinesReadOnce: rsocket-go's lines come out once per wrapper, on one line; the line of
// a connection closed before its first frame, which the coordinator logs with the client's
// address, is turned down to debug.
func TestRSocketLinesReadOnce(t *testing.T) {
	var buf bytes.Buffer
	l := rsocketLogger{log: zerolog.New(&buf).Level(zerolog.DebugLevel)}
	l.Errorf("read first frame failed: %s\n", errors.New("read first frame failed: read frame failed:: read tcp 127.0.0.1:7878->127.0.0.1:5555: i/o timeout"))
	l.Errorf("send frame failed: %s\n", errors.New("write frame failed: write: broken pipe"))
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var v struct{ Level, Message string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Level+": "+v.Message)
	}
	want := []string{
		"debug: connection closed before its first frame: read tcp 127.0.0.1:7878->127.0.0.1:5555: i/o timeout",
		"info: send frame failed: write frame failed: write: broken pipe",
	}
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGocqlLinesAreBounded: the driver's lines come out as one JSON line each, component gocql,
// and at most gocqlLinesPerMinute of them a minute, however many it writes.
func TestGocqlLinesAreBounded(t *testing.T) {
	var buf bytes.Buffer
	l := newGocqlLogger(zerolog.New(&buf))
	for range 50 {
		l.Printf("gocql: unable to dial control conn %s: %v\n", "127.0.0.1:9042", errors.New("connect: connection refused"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != gocqlLinesPerMinute {
		t.Fatalf("%d lines for 50 within a minute, want %d", len(lines), gocqlLinesPerMinute)
	}
	var v struct{ Level, Component, Message string }
	if err := json.Unmarshal([]byte(lines[0]), &v); err != nil {
		t.Fatal(err)
	}
	if v.Level != "info" || v.Component != "gocql" || v.Message != "gocql: unable to dial control conn 127.0.0.1:9042: connect: connection refused" {
		t.Fatalf("line %+v", v)
	}
}
