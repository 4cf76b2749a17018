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
// variable, then every flag set by neither from the config file (--config, or RETRYRING_CONFIG;
// config.go): flags win over the environment, the environment over the file, the file over the
// defaults. Call it from PreRunE.
func bindEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var firstErr error
	fromEnv := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			fromEnv[f.Name] = true
			markGiven(f)
			if err := f.Value.Set(v); err != nil {
				firstErr = fmt.Errorf("environment %s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if firstErr != nil {
		return firstErr
	}
	cfg := cmd.Flags().Lookup(configFlag)
	if cfg == nil || cfg.Value.String() == "" {
		return nil
	}
	file, err := loadConfig(cfg.Value.String(), cmd.Root())
	if err != nil {
		return err
	}
	return file.apply(cmd, func(f *pflag.Flag) bool { return fromEnv[f.Name] })
}

// annotateEnv appends the environment variable to each flag's usage text.
func annotateEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, envName(f.Name))
	})
}

// givenAnnotation marks a flag that bindEnv set from the environment or the config file.
const givenAnnotation = "retryring_given"

func markGiven(f *pflag.Flag) {
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[givenAnnotation] = []string{"true"}
}

// flagGiven reports whether the flag was given on the command line, in the environment or in the
// config file, as opposed to holding its default. Call it after bindEnv.
func flagGiven(cmd *cobra.Command, name string) bool {
	f := cmd.Flags().Lookup(name)
	return f != nil && (f.Changed || len(f.Annotations[givenAnnotation]) > 0)
}
