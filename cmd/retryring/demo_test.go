package main

import (
	"errors"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/demo"
)

// parseDemo parses args and env into a demo.Config, as the command does before it runs.
func parseDemo(t *testing.T, args []string, env map[string]string) (demo.Config, error) {
	t.Helper()
	o := &demoOptions{}
	cmd := demoCommand(o)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := bindEnv(cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		return demo.Config{}, err
	}
	return o.config()
}

func TestDemoDefaultsAreTheDemosDefaults(t *testing.T) {
	cfg, err := parseDemo(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Count != demo.DefaultCount || cfg.Instances != demo.DefaultInstances || cfg.Workers != demo.DefaultWorkers ||
		cfg.Duration503 != demo.DefaultDuration503 || cfg.Backdate != 0 || cfg.Keep || cfg.NoFaults ||
		cfg.Cassandra != demo.DefaultCassandra || cfg.Display != demo.DisplayAuto {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestDemoFlagsAndEnvironment(t *testing.T) {
	cfg, err := parseDemo(t,
		[]string{"--count", "500", "--duration-503", "0", "--keep", "--display", "plain", "--permanent-fraction", "0"},
		map[string]string{"RETRYRING_COUNT": "9", "RETRYRING_INSTANCES": "4", "RETRYRING_CASSANDRA": "10.0.0.1:9042", "RETRYRING_BACKDATE": "5m"})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case cfg.Count != 500:
		t.Errorf("count %d: the command line wins over RETRYRING_COUNT", cfg.Count)
	case cfg.Instances != 4 || cfg.Cassandra != "10.0.0.1:9042" || cfg.Backdate != 5*time.Minute:
		t.Errorf("environment not applied: %+v", cfg)
	case cfg.Duration503 >= 0:
		t.Errorf("--duration-503 0 must mean no 503 phase (a negative Config value), got %v", cfg.Duration503)
	case cfg.PermanentFraction >= 0:
		t.Errorf("--permanent-fraction 0 must mean none (a negative Config value), got %v", cfg.PermanentFraction)
	case !cfg.Keep || cfg.Display != demo.DisplayPlain:
		t.Errorf("keep/display: %+v", cfg)
	}
}

func TestDemoRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--display", "fancy"},
		{"--count", "0"},
		{"--duration-503", "-1s"},
		{"--timeout", "0s"},
		{"--workers", "1"}, // the faults need two workers
		{"--keyspace", "no-dashes"},
	} {
		if _, err := parseDemo(t, args, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := parseDemo(t, []string{"--workers", "1", "--no-faults"}, nil); err != nil {
		t.Errorf("one worker without faults refused: %v", err)
	}
	_, err := parseDemo(t, []string{"--workers", "1"}, nil)
	if !errors.Is(err, demo.ErrInvalidConfig) {
		t.Errorf("error %v is not demo.ErrInvalidConfig", err)
	}
}
