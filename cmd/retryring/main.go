package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/wallclock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Only a test build (the skewclock tag) has a skew; say it, so that no log of such a process
	// is read as if its clock were the host's.
	switch skew, err := wallclock.Skew(); {
	case err != nil:
		fmt.Fprintln(os.Stderr, "retryring:", err)
		os.Exit(2)
	case skew != 0:
		fmt.Fprintf(os.Stderr, "retryring: test build: wall clock runs %v off the host's (%s)\n", skew, wallclock.SkewEnv)
	}
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "retryring:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "retryring",
		Short:         "Retry scanner for sagas on Apache Cassandra, with a Raft-replicated ring coordinator",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentVersion().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().String(configFlag, "", "YAML file of flag values: flag names as keys, at the top or in a section per subcommand (env RETRYRING_CONFIG)")
	root.AddCommand(
		newVersionCommand(),
		newCoordinatorCommand(),
		newWorkerCommand(),
		newRecordCommand(),
		newSchemaCommand(),
		newDeadLettersCommand(),
		newDemoCommand(),
		newCtlCommand(),
		newTokenCommand(),
	)
	explainEveryArgs(root)
	return root
}
