# hnsplan, the CLI, for CI jobs (vet, compile, diff, publish, and
# examples/ci/hnsplan-pr.sh): a static binary built from this checkout, on
# Alpine with what those jobs call: git (hnsplan diff --base reads the base
# revision with it), sh, jq and curl (the comment script).
#
# Build it from the repository root (BuildKit; --platform
# linux/amd64,linux/arm64 for both):
#
#   docker buildx build -f deploy/images/hnsplan.Dockerfile \
#     --build-arg VERSION=$(git describe --tags --always --dirty) --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t ghcr.io/hnsplan/hnsplan:vX.Y.Z .
#
# The entrypoint is hnsplan; a CI system that runs its job's script in the
# image overrides it (GitLab CI: image: {name: ..., entrypoint: [""]}).
#
# The build stage compiles as `make release` does (-trimpath, no cgo, no VCS
# data, the version and commit stamped), with the Go of go.mod's go line;
# examples/deploy_images_test.go keeps the two in step.
FROM --platform=$BUILDPLATFORM golang:1.26.8 AS build
ARG TARGETOS TARGETARCH VERSION COMMIT
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/hnsplan/hnsplan/internal/buildinfo.version=${VERSION} -X github.com/hnsplan/hnsplan/internal/buildinfo.commit=${COMMIT}" \
      -o /out/hnsplan ./cmd/hnsplan

FROM alpine:3.22
# A CI job's checkout belongs to the runner's user, not to the job's
# container user: git refuses such a repository unless told it is safe.
RUN apk add --no-cache git jq curl ca-certificates && \
    git config --system --add safe.directory '*'
COPY --from=build /out/hnsplan /usr/local/bin/hnsplan
LABEL org.opencontainers.image.source="https://github.com/hnsplan/hnsplan" \
      org.opencontainers.image.title="hnsplan" \
      org.opencontainers.image.description="hnsplan CLI for CI"
ENTRYPOINT ["/usr/local/bin/hnsplan"]
