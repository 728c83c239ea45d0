# syntax=docker/dockerfile:1
# flashsale as a container: a static Go binary on distroless (no shell, no package manager; CA
# certificates and time zone data included), run as a non-root user. Postgres and Redis are given
# by URL (FLASHSALE_DATABASE_URL, FLASHSALE_REDIS_URL); NATS JetStream is external
# (FLASHSALE_NATS_URL, as in deploy/compose.yaml) or, for one instance alone, embedded with its
# store in /data. DEPLOYMENT.md says how to run it.
# `make docker-check` and deploy/deploy_test.go run this build command without a Docker engine:
# keep the `go build` line as it is.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /flashsale .
# The volume's mount point, owned by the runtime user so that a fresh volume is writable.
RUN mkdir /data && chown 65532:65532 /data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /flashsale /flashsale
COPY --from=build --chown=65532:65532 /data /data
# Listen on every interface of the container; production mode refuses the development JWT
# secret, the test captcha and RATE_LIMITS=off, so FLASHSALE_JWT_SECRET must be given.
# /metrics and /debug/pprof/ stay on loopback unless FLASHSALE_METRICS_ADDR says otherwise
# (compose.yaml opens them on the private network, port 9090, never published).
ENV FLASHSALE_ADDR=0.0.0.0:8080 \
    FLASHSALE_ENV=production \
    FLASHSALE_DATA_DIR=/data
VOLUME /data
# nonroot is uid 65532 in distroless.
USER nonroot:nonroot
EXPOSE 8080 9090
# The image has no curl: `flashsale healthcheck` GETs /readyz on FLASHSALE_ADDR and exits 0
# when Redis, Postgres and NATS are all reachable, 1 otherwise.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/flashsale", "healthcheck"]
ENTRYPOINT ["/flashsale"]
CMD ["serve"]
