# awaken-nats: nats-server built from the nats-server/v2 module pinned in go.mod, with the
# awaken NATS configuration (accounts, users, permissions, JetStream storage).
#
# Nothing comes from a registry: the base is scratch and the context (assembled by
# `make images` in bin/images/nats, or in memory by pkg/awakentest) holds
#   nats-server          the static server binary
#   awaken-healthcheck   a static HTTP probe (scratch has no curl) for the health check
#   nats/                single.conf, cluster.conf and auth.conf from deploy/nats
#   data/                an empty directory, to create /data owned by the runtime user
# Do not add a "# syntax=" line: BuildKit would pull the dockerfile frontend.
FROM scratch
COPY nats-server /nats-server
COPY awaken-healthcheck /awaken-healthcheck
COPY nats/ /etc/nats/
# The JetStream store. Mount a named volume here: an empty volume takes this directory's
# owner, so the non-root server can write it.
COPY --chown=65532:65532 data/ /data/
# An anonymous volume unless one is mounted: the store survives a restart of the container
# and stays off the image's copy-on-write layer (fsync there can be slow).
VOLUME ["/data"]
USER 65532:65532
EXPOSE 4222 6222 8222
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/awaken-healthcheck", "http://127.0.0.1:8222/healthz?js-enabled-only=true"]
ENTRYPOINT ["/nats-server"]
CMD ["-c", "/etc/nats/single.conf"]
