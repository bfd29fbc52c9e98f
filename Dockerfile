# The mcs-registry and mcs-admin binaries in a small, non-root image, and
# mcs-controller in one of its own (target mcs-controller). Tagged as the
# charts' defaults (image.repository, and the tag their appVersion), as
# docs/deployment.md builds and pushes them (tests/images.rs checks both):
#   docker build -t mcs-registry:0.1.0 --build-arg MCS_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker build -t mcs-controller:0.1.0 --target mcs-controller --build-arg MCS_GIT_COMMIT=$(git rev-parse --short=12 HEAD) .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Named by --version and the mcs_build_info metric; "unknown" when not
# given (.git is not copied in).
ARG MCS_GIT_COMMIT=unknown
ENV MCS_GIT_COMMIT=$MCS_GIT_COMMIT
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev make && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cargo build --release --locked -p mcs-registry -p mcs-admin -p mcs-controller \
    && cp target/release/mcs-registry target/release/mcs-admin target/release/mcs-controller /usr/local/bin/

# The controller's image (charts/mcs-controller), the same base and user.
FROM gcr.io/distroless/cc-debian12:nonroot AS mcs-controller
COPY --from=build /usr/local/bin/mcs-controller /usr/local/bin/
USER nonroot
# --admin-listen's default port (health and metrics).
EXPOSE 9091
ENTRYPOINT ["/usr/local/bin/mcs-controller"]

# distroless/cc: glibc, libgcc, CA certificates and nothing else; runs as
# the unprivileged "nonroot" user (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/mcs-registry /usr/local/bin/mcs-admin /usr/local/bin/
USER nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/mcs-registry"]
