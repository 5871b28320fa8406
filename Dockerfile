# syntax=docker/dockerfile:1
# stratus-ccm: a static binary on a distroless base, running as non-root.
#   docker build -t stratus-ccm --build-arg VERSION=v0.1.0 .

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that source changes reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/stratus-ccm ./cmd/stratus-ccm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/stratus-ccm /usr/local/bin/stratus-ccm
# 65532 is distroless' nonroot user; the Helm chart runs as the same IDs.
USER 65532:65532
EXPOSE 10258
ENTRYPOINT ["/usr/local/bin/stratus-ccm"]
