// Package docs holds no code of the product: its tests run the command blocks of README.md and
// docs/operations.md that are marked runnable, so that the documents cannot drift from the binary.
// Nothing imports it; it is never linked into bin/retryring. It sits beside the Markdown it runs so
// that a writer who edits a marked block finds the rules here.
//
// # Markers
//
// A marker is an HTML comment on the line right before a fenced block (GitHub does not render it):
//
//	<!-- runnable: NAME [background] [retry=DURATION] [timeout=DURATION] -->
//	<!-- rendered: NAME: REASON -->
//
// NAME is unique in its file ([a-z0-9-]). The blocks of one file run in their order in the file, in
// one scratch directory, each as its own `bash -e -o pipefail` script:
//   - runnable: the block must exit 0 within its timeout (default 2m).
//   - background: the block starts long-running processes (lines ending in `&`) that later blocks
//     use; it passes while they run, and fails the test if one of them exits before the file's run
//     ends. Its processes are killed (their process group) when the run ends.
//   - retry=DURATION: the block runs again, once a second, until it exits 0, for at most DURATION:
//     for a block that talks to processes a background block just started, as a person would
//     (a leader is elected a few seconds after the coordinators start).
//   - rendered: a `helm` or `kubectl` block that needs a Kubernetes cluster; REASON says so. It is
//     not run but rendered: `helm install` and `helm upgrade --install` become `helm template` (bin/helm,
//     from `make chart-check`), `kubectl create` gets `--dry-run=client -o yaml`, and every manifest is
//     validated by kubernetes-validate --strict (bin/venv). A values file that is not in the
//     repository (my-values.yaml) stands for the chart's ci/tls-values.yaml; a file a kubectl line
//     reads that no block made is a stand-in (a self-signed key pair for --cert/--key). The keys of
//     every Secret must be file names the chart's pods read (rendered with ci/tls-values.yaml).
//
// In README.md's "In production" section and docs/operations.md's "TLS" and "Tokens and
// authentication" sections, every command block (a fence without a language, or sh/bash/shell)
// must carry a marker: the test fails on an unmarked one.
//
// # What the blocks run against
//
//   - `retryring` and `bin/retryring` are the module's bin/retryring (`make build`; `make test`
//     builds it first). The test fails when it is missing.
//   - Ports are not substituted: each file runs in a network namespace of its own (unshare --net,
//     root needed, as `make test` has), whose loopback is up and empty, so the documented ports
//     (7400, 7878, 7480, 7401-7403, ...) are used as written and cannot collide with other tests.
//   - Every DNS name in a `subjectAltName=` of the file's blocks resolves to 127.0.0.1 in that
//     namespace (a hosts file bind-mounted over /etc/hosts in a mount namespace of its own), so a
//     certificate keeps the names the recipe gives it and dials of those names reach the loopback.
//   - 127.0.0.1:9042 in the namespace is the shared test Cassandra (testkit/cassandratest's address),
//     forwarded through a Unix socket. The keyspace is the test's own: `--keyspace retryring` is
//     replaced by it and RETRYRING_KEYSPACE names it; it has the schema already (README's "the schema,
//     once" step) and is dropped at the end. That is the only text substituted.
//   - The environment is the test's without RETRYRING_* variables.
//
// Run it alone with `make build && go test -count=1 ./docs` (-v shows what each block printed;
// RETRYRING_REQUIRE_HELM=1, as `make test` sets, makes a rendered block fail rather than be left
// unrendered without bin/helm and bin/venv).
package docs
