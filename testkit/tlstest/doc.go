// Package tlstest makes certificate authorities and certificates in process (crypto/x509) for
// tests and benchmarks of retryring's TLS: servers on loopback, clients for mutual TLS, workers
// whose certificates bind worker ids by a SAN, and the bad cases (expired, not yet valid, signed
// by another CA). Keys are ECDSA P-256, so making one costs about a millisecond.
//
// It panics on failures of crypto/rand or x509 encoding, which do not happen with the templates
// it builds; it is not for production certificates.
package tlstest
