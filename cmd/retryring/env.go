package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envName is the environment variable of a flag: --node-id → RETRYRING_NODE_ID.
func envName(flag string) string {
	return "RETRYRING_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag of cmd that was not given on the command line from its environment
// variable, and names the variable in the flag's help. Call it from PreRunE.
func bindEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				firstErr = fmt.Errorf("environment %s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	return firstErr
}

// annotateEnv appends the environment variable to each flag's usage text.
func annotateEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, envName(f.Name))
	})
}
