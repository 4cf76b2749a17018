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

// envAnnotation names a flag's environment variable when it is not envName(flag.Name): a flag name
// that means different things in different subcommands (--token-file: the worker's ring token, ctl's
// admin token) gets a variable of its own in one of them. envDeprecatedAnnotation lists the older
// names still read for it, each with a warning.
const (
	envAnnotation           = "retryring_env"
	envDeprecatedAnnotation = "retryring_env_deprecated"
)

// setEnv gives flag name of cmd the variable env, still reading each of deprecated with a warning.
func setEnv(cmd *cobra.Command, name, env string, deprecated ...string) {
	f := cmd.Flags().Lookup(name)
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
	f.Annotations[envDeprecatedAnnotation] = deprecated
}

// flagEnv is the environment variable of f.
func flagEnv(f *pflag.Flag) string {
	if v := f.Annotations[envAnnotation]; len(v) > 0 {
		return v[0]
	}
	return envName(f.Name)
}

// lookupFlagEnv reads f's variable, else the first of its deprecated ones that is set, with a
// line on stderr saying which name to use instead.
func lookupFlagEnv(cmd *cobra.Command, f *pflag.Flag, lookup func(string) (string, bool)) (name, value string, ok bool) {
	name = flagEnv(f)
	if value, ok = lookup(name); ok {
		return name, value, true
	}
	for _, old := range f.Annotations[envDeprecatedAnnotation] {
		if value, ok = lookup(old); ok {
			fmt.Fprintf(cmd.ErrOrStderr(), "retryring: %s is deprecated for %s --%s: set %s instead\n", old,
				strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), f.Name, name)
			return old, value, true
		}
	}
	return "", "", false
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
		if env, v, ok := lookupFlagEnv(cmd, f, lookup); ok {
			fromEnv[f.Name] = true
			markGiven(f)
			if err := f.Value.Set(v); err != nil {
				firstErr = fmt.Errorf("environment %s=%q: %w", env, v, err)
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
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, flagEnv(f))
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
