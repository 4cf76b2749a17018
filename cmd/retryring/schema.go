package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
)

func newSchemaCommand() *cobra.Command {
	var cf cassandraFlags
	var replication string
	schema := &cobra.Command{Use: "schema", Short: "Print or apply the CQL schema of the retry directory"}
	print := &cobra.Command{
		Use:   "print",
		Short: "Print the CQL statements",
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			stmts, err := schemaStatements(cf.keyspace, replication)
			if err != nil {
				return err
			}
			for _, s := range stmts {
				fmt.Fprintf(cmd.OutOrStdout(), "%s;\n\n", strings.TrimSpace(s))
			}
			return nil
		},
	}
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Create the keyspace and tables (idempotent)",
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := cassandra.ParseReplication(replication)
			if err != nil {
				return err
			}
			cfg, err := cf.config()
			if err != nil {
				return err
			}
			cfg.Keyspace = ""                 // the keyspace may not exist yet
			if cfg.Timeout < 20*time.Second { // creating tables is slow on a busy node
				cfg.Timeout = 20 * time.Second
			}
			session, err := cassandra.Connect(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer session.Close()
			if err := cassandra.ApplySchema(cmd.Context(), session, cf.keyspace, r); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema applied to keyspace %s\n", cf.keyspace)
			return nil
		},
	}
	for _, c := range []*cobra.Command{print, apply} {
		cf.register(c.Flags())
		c.Flags().StringVar(&replication, "replication", "1", `replication: a SimpleStrategy factor ("3") or datacenter factors ("dc1=3,dc2=3")`)
		annotateEnv(c)
		schema.AddCommand(c)
	}
	return schema
}

func schemaStatements(keyspace, replication string) ([]string, error) {
	r, err := cassandra.ParseReplication(replication)
	if err != nil {
		return nil, err
	}
	return cassandra.Schema(keyspace, r)
}
