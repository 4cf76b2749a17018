// Package image holds the tests of the container image that `make image` builds from the
// repository's Dockerfile; it has no code of its own. The passwd and group files beside this file
// are the image's: its only user, retryring, uid and gid 65532.
//
// The tests read what a user gets, the archives under bin/image, and never rebuild the image:
//   - archive_test.go opens bin/image/retryring-<appVersion>.docker.tar (what `docker load` takes)
//     and .oci.tar (what `podman load` takes): both name the image the Helm chart deploys by
//     default and hold the same image; its only layer holds the static binary, the CA bundle and
//     the user, nothing else, and its configuration runs the binary as that numeric non-root user,
//     with labels naming the repository's commit.
//   - run_test.go starts a container from the docker archive with Debian's buildah (`buildah from`,
//     then `buildah run --isolation chroot`: no daemon, the host's network), checks that `version`
//     prints the commit of git rev-parse HEAD, then runs a single-node coordinator on loopback
//     ports whose /healthz and /readyz answer the host, and whose Raft files belong to the
//     image's user. The container is removed at the end; the image stays in bin/image/storage.
//
// They live here rather than in e2e because they test a deploy artifact, like deploy/helm, and need
// no Cassandra; `make test` runs them on its main line after `make image`.
//
// Without the archives (a plain `go test ./...` before `make image`) the tests are skipped;
// `make test` sets RETRYRING_REQUIRE_IMAGE=1, under which a missing archive or a missing buildah
// fails them instead.
package image
