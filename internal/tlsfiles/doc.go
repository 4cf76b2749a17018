// Package tlsfiles turns the TLS flags of every retryring part (PEM files of a certificate, its key
// and a CA) into a *tls.Config, with errors that name the file and what is wrong with it.
//
// Server certificates are re-read when their files change (Kubernetes rotates mounted Secrets in
// place), at most once per second, so a rotated certificate takes effect without a restart; a file
// that cannot be read at that moment keeps the last good certificate in use. It never reads
// anything but the files it is given and never logs.
package tlsfiles
