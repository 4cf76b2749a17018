// Package helm holds the tests of the Helm chart in retryring/ (deploy/helm/retryring); it has
// no code of its own.
//
// The tests run the real tools and the real binary:
//   - chart_test.go renders the chart with `helm template` (ci/auth-values.yaml, the defaults plus
//     the authentication they require, and ci/tls-values.yaml), parses the manifests back and
//     checks names, ports, probes, the PodDisruptionBudget, and the args, environment and Secret
//     mounts the pods get; values the schema refuses fail to render.
//   - auth_test.go: without tokens and a cluster secret the chart refuses to render, with commands
//     that make them; the test runs those commands and starts a coordinator and a worker on the
//     files they make. Each pod mounts only its own keys of the auth Secret.
//   - schemajob_test.go: the schema hook Job, and its command run twice against Cassandra.
//   - tls_test.go runs docs/operations.md's TLS recipe for the chart and verifies every name the
//     rendered pods and NOTES dial against the certificates it makes.
//   - notes_test.go renders NOTES.txt and checks every command it prints against the binary's
//     flags and the rendered Services.
//   - metrics_test.go checks that every metric the Grafana dashboard and the alert rules query is
//     exported by a running coordinator and a running worker (real processes, real Cassandra).
//   - statefulset_test.go starts three coordinators with exactly the command lines, environment
//     and auth Secret the StatefulSet renders, kills one with SIGKILL and brings it back on its
//     data directory.
//
// `make test` installs helm into bin/ (`make chart-check` also lints the chart and validates the
// rendered manifests against the Kubernetes schemas) and sets RETRYRING_REQUIRE_HELM=1, under
// which a missing helm fails the tests instead of skipping them.
package helm
