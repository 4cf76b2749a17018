package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// argHints say what each positional argument of a ctl command is, by the name its Use gives it.
var argHints = map[string]string{
	"WORKER":         "the worker's id (ctl ring lists them)",
	"ID":             "the coordinator's node id, its --node-id (ctl peers lists them)",
	"RAFTADDR":       "the node's Raft address, HOST:PORT, as its --raft-addr",
	"TRANSACTION_ID": "the transaction's id (deadletters list shows them)",
	"RING":           "the ring, as REGION/CLUSTER/SERVICE (ctl ring lists them)",
	"MODE":           "the movement mode, minimal or contiguous",
}

// explainEveryArgs gives every runnable command under c the one-line refusal of explainArgs: a
// command that takes no arguments refuses a stray one (cobra would run `retryring coordinator
// extra` and ignore the word, which hides a flag typed without its dashes), and one that takes
// some says which.
func explainEveryArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		explainEveryArgs(sub)
	}
	if !c.Runnable() {
		return // a group: cobra answers an unknown subcommand itself
	}
	check := c.Args
	if check == nil {
		check = cobra.NoArgs
	}
	c.Args = explainArgs(c.Use, check)
}

// usageArgs are the positional arguments a command's Use names: its words after the command's
// name up to the first flag or optional part ("cordon WORKER [--ring R]" names WORKER, "pause
// --ring R" none).
func usageArgs(use string) []string {
	var names []string
	for _, w := range strings.Fields(use)[1:] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
			break
		}
		names = append(names, w)
	}
	return names
}

// explainArgs runs check, cobra's count of a command's arguments, and turns its refusal
// ("accepts 1 arg(s), received 0") into one line that says what the command needs.
func explainArgs(use string, check cobra.PositionalArgs) cobra.PositionalArgs {
	names := usageArgs(use)
	return func(cmd *cobra.Command, args []string) error {
		if check(cmd, args) == nil {
			return nil
		}
		path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		if len(names) == 0 {
			return fmt.Errorf("%s takes no arguments, got %s (its flags: retryring %s --help)", path, quoteArgs(args), path)
		}
		need := path + " " + strings.Join(names, " ")
		if len(args) > len(names) {
			return fmt.Errorf("%s: takes %s, got %d: %s", need, plural(len(names), "argument"), len(args), quoteArgs(args))
		}
		missing := make([]string, 0, len(names)-len(args))
		for _, n := range names[len(args):] {
			missing = append(missing, n+", "+argHints[n])
		}
		return fmt.Errorf("%s: give %s", need, strings.Join(missing, "; and "))
	}
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%.60q", a)
	}
	return strings.Join(q, " ")
}

// plural is "1 argument", "2 arguments".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
