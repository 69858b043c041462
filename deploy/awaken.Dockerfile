# awaken: every service of the pipeline in one image; the first argument picks it
# (batcher, gate, brain-exec, sandbox-exec, publisher, setup, dev, healthcheck, ...).
#
# Nothing comes from a registry: the base is scratch and the context (assembled by
# `make images` in bin/images/awaken, or in memory by pkg/awakentest) holds
#   awaken        the static binary (CGO_ENABLED=0, -tags timetzdata: scratch has no zoneinfo)
#   wasm/         the example WebAssembly tools (make wasm)
#   awaken.yaml   the example host configuration
#   data/         an empty directory, to create /data and /tmp owned by the runtime user
# Do not add a "# syntax=" line: BuildKit would pull the dockerfile frontend.
FROM scratch
COPY awaken /opt/awaken/bin/awaken
COPY wasm/ /opt/awaken/bin/wasm/
# The example configuration names its modules as ../bin/wasm/*.wasm; a configuration
# mounted at /opt/awaken/config/awaken.yaml resolves the same relative paths.
COPY awaken.yaml /opt/awaken/examples/awaken.yaml
# Writable places for the non-root user: /data (awaken dev's JetStream store; mount a
# volume) and /tmp (sandbox scratch directories; mount a tmpfs in production).
COPY --chown=65532:65532 data/ /data/
COPY --chown=65532:65532 data/ /tmp/
ENV AWAKEN_CONFIG=/opt/awaken/examples/awaken.yaml \
    AWAKEN_HTTP=:8080 \
    TMPDIR=/tmp
WORKDIR /opt/awaken
# 65532 is the conventional "nonroot" id; scratch has no /etc/passwd, so it stays numeric.
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["/opt/awaken/bin/awaken", "healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/opt/awaken/bin/awaken"]
CMD ["help"]
