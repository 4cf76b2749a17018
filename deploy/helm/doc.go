// Package helm holds the tests of the Helm chart in retryring/ (deploy/helm/retryring); it has
// no code of its own.
//
// The tests run the real tools and the real binary:
//   - chart_test.go renders the chart with `helm template` (default values and ci/tls-values.yaml),
//     parses the manifests back and checks names, ports, probes, the PodDisruptionBudget, and the
//     args, environment and Secret mounts the pods get; values the schema refuses fail to render.
//   - metrics_test.go checks that every metric the Grafana dashboard and the alert rules query is
//     exported by a running coordinator and a running worker (real processes, real Cassandra).
//   - statefulset_test.go starts three coordinators with exactly the command lines and environment
//     the StatefulSet renders, kills one with SIGKILL and brings it back on its data directory.
//
// `make test` installs helm into bin/ (`make chart-check` also lints the chart and validates the
// rendered manifests against the Kubernetes schemas) and sets RETRYRING_REQUIRE_HELM=1, under
// which a missing helm fails the tests instead of skipping them.
package helm
