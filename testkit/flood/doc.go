// Package flood is a crowd of bad clients for a coordinator's RSocket port: garbage connections
// (random bytes, or nothing at all until the coordinator gives up on them) and SETUPs without
// valid credentials (no token, or a random one) claiming the ids of real workers, each at a fixed
// rate, and a watch of how long real workers went without a usable lease meanwhile. The flood
// test of the coordinator and bench/flood share it.
//
// It never sends a valid token and never follows a redirect: what a coordinator owes such a
// client is a refusal that costs its real workers nothing (docs/operations.md, "Limits").
package flood
