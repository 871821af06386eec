# syntax=docker/dockerfile:1
# gpu-gang's image for people with Docker (or BuildKit, Podman, Buildah):
#
#   docker build -t registry.example.com/gpu-gang:v0.1.0 \
#     --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#
# `make image` builds the same image without any of them (hack/image): the
# same static binaries, user, CA certificates and labels, on a base it
# assembles itself instead of distroless.
#
# Never build with -trimpath: see the Makefile.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG VERSION=v0.1.0
ARG COMMIT=unknown
ARG TARGETARCH
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    for b in scheduler:gpu-gang-scheduler podgroup-controller:podgroup-controller; do \
      CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} go build -buildvcs=false \
        -ldflags "-s -w -X github.com/gpu-gang/gpu-gang/pkg/version.version=${VERSION} -X github.com/gpu-gang/gpu-gang/pkg/version.commit=${COMMIT}" \
        -o /out/${b#*:} ./cmd/${b%%:*} || exit 1; \
    done

# Static binaries need no libc; distroless/static has the users, CA
# certificates and /tmp that hack/image builds by hand.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.1.0
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="gpu-gang" \
      org.opencontainers.image.description="gpu-gang-scheduler (kube-scheduler with gang admission and interconnect-aware placement) and podgroup-controller" \
      org.opencontainers.image.source="https://github.com/gpu-gang/gpu-gang" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/gpu-gang-scheduler /out/podgroup-controller /
USER 65532:65532
ENTRYPOINT ["/gpu-gang-scheduler"]
