# syntax=docker/dockerfile:1
# Build context: the repository root (docker build .). .git stays in the
# context so the binary names the revision it was built from (ediwatch version).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite driver needs no cgo): a static binary.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ediwatch ./cmd/ediwatch

# No shell, no package manager; CA certificates for verified TLS; non-root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ediwatch /usr/local/bin/ediwatch
USER nonroot:nonroot
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/ediwatch"]
CMD ["run", "--config", "/etc/ediwatch/ediwatch.yaml"]
