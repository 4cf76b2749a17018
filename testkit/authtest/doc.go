// Package authtest holds what tests of authentication share: replacing a tokens or secret file the
// way a Kubernetes Secret update does, so that the reload path sees one complete file or the other.
package authtest
