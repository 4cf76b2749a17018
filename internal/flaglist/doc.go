// Package flaglist reads the comma-separated lists that command-line flags and the demo's
// configuration take: Cassandra hosts, coordinator addresses, the coordinators to join.
//
// It owns one rule, so that every list flag reads alike: items are separated by commas, blanks
// around an item are dropped, and so are empty items ("a, b,,c," is a, b and c). It never
// checks what an item is; the package the list goes to does (a host, an address, a peer).
//
//	flaglist.Split("cass-1:9042, cass-2:9042") // ["cass-1:9042" "cass-2:9042"]
package flaglist
