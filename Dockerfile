# syntax=docker/dockerfile:1
# A static binary on a distroless base. The image needs Postgres and Redis given by URL
# (FLASHSALE_DATABASE_URL, FLASHSALE_REDIS_URL); NATS JetStream runs embedded, its store in /data.
# `make docker-check` runs this build command without a Docker engine.

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
ENV FLASHSALE_ADDR=0.0.0.0:8080 \
    FLASHSALE_ENV=production \
    FLASHSALE_DATA_DIR=/data
VOLUME /data
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/flashsale"]
CMD ["serve"]
