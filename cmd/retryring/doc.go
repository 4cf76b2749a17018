// Command retryring is the one binary of the project: `coordinator`, `worker`, `record`, `schema`,
// `deadletters`, `demo` and the operator CLI `ctl`, registered in one list by the root command.
// Every flag also reads an environment variable named RETRYRING_ followed by the flag's name in
// upper snake case (--node-id ↔ RETRYRING_NODE_ID); a flag given on the command line wins over the
// environment.
//
// This package only parses flags and wires the library packages together; it holds no logic of its
// own.
package main
