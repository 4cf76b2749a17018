// Package transcript runs data-driven tests written as text transcripts, in the style of
// etcd-io/raft's testdata interaction tests: a file is a sequence of commands, each followed by
// the output the test expects of it, so a scenario reads as a session a reader can follow line by
// line and the test is that the code still produces that session.
//
// A file is made of blocks, separated by blank lines, and comment lines (starting with #):
//
//	# A comment: why the next commands matter.
//	join a
//	----
//	what the driver printed for "join a"
//	on one or more lines
//
// Run hands each command to the test's driver, in order, and fails the test on every output that
// differs from the expected one. Run with -rewrite (go test ./pkg -run TestX -rewrite), it writes
// what the driver printed into the file instead, keeping commands and comments: the way to write
// a new transcript, and to review, as a diff, what a change of behaviour changes. An output cannot
// hold a blank line, which ends a block.
//
// The package also gives the text forms of the ring state (members, assignments, holds, commands)
// that the transcripts of fsm.Plan and of the coordinator's decisions print alike.
package transcript
