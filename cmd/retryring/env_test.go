package main

import (
	"testing"

	"github.com/spf13/cobra"
)

func TestEnvFillsFlagsNotGiven(t *testing.T) {
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	a := cmd.Flags().String("node-id", "default", "")
	b := cmd.Flags().Int("window-minutes", 1, "")
	if err := cmd.Flags().Parse([]string{"--window-minutes", "5"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RETRYRING_NODE_ID": "c7", "RETRYRING_WINDOW_MINUTES": "10"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := bindEnv(cmd, lookup); err != nil {
		t.Fatal(err)
	}
	if *a != "c7" {
		t.Errorf("node-id = %q, want c7 from the environment", *a)
	}
	if *b != 5 {
		t.Errorf("window-minutes = %d, want 5 from the command line (it wins over the environment)", *b)
	}
}

func TestEnvRefusesBadValue(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	cmd.Flags().Int("concurrency", 100, "")
	lookup := func(k string) (string, bool) { return "many", k == "RETRYRING_CONCURRENCY" }
	if err := bindEnv(cmd, lookup); err == nil {
		t.Fatal("a non-numeric RETRYRING_CONCURRENCY was accepted")
	}
}
