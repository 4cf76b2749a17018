# The retryring image: the static binary, the CA bundle and a non-root user, nothing else (no shell).
#
# Build it with `make image`, not with this file alone: the context is bin/image/context, which the
# Makefile fills with the binary (built on the host with CGO_ENABLED=0, its version and commit set by
# -ldflags -X as for `make build`), the host's /etc/ssl/certs/ca-certificates.crt and the passwd and
# group files of deploy/image. No base image can be pulled where this project is built, so this file
# only copies. Where images can be pulled, a first stage FROM a golang image running the same
# `go build` would make the build independent of the host's toolchain; the final stage stays this one.
FROM scratch

ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=https://github.com/retryring/retryring

LABEL org.opencontainers.image.title="retryring" \
      org.opencontainers.image.description="A retry scanner for sagas on Apache Cassandra, with a Raft + RSocket ring coordinator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"

# Go reads the system roots from this path: TLS to Cassandra, to coordinators or to an executor
# signed by a public CA needs no mounted bundle.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY passwd group /etc/
# The chart mounts the coordinator's volume on /var/lib/retryring; without a volume the directory
# is still the user's (and only it: /var and /var/lib, copied first, stay root's), so `coordinator`
# with its default data dir works in a plain `docker run`.
COPY var/ /var/
COPY --chown=65532:65532 home/ /var/lib/retryring/
COPY retryring /usr/local/bin/retryring

# Numeric, so that Kubernetes' runAsNonRoot can check it without reading /etc/passwd; the chart's
# podSecurityContext runs the same uid.
USER 65532:65532
WORKDIR /var/lib/retryring
ENTRYPOINT ["/usr/local/bin/retryring"]
