# The mcs-registry and mcs-admin binaries in a small, non-root image, and
# mcs-controller in one of its own (target mcs-controller; charts/ use both).
#   docker build -t mcs-registry --build-arg MCS_GIT_COMMIT=$(git rev-parse --short HEAD) .
#   docker build -t mcs-controller --target mcs-controller .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Named by the mcs_build_info metric; "unknown" when not given.
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
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mcs-controller"]

# distroless/cc: glibc, libgcc, CA certificates and nothing else; runs as
# the unprivileged "nonroot" user (uid 65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/mcs-registry /usr/local/bin/mcs-admin /usr/local/bin/
USER nonroot
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/mcs-registry"]
