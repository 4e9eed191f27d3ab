# The image of deploy/daemonset.yaml: hnsplan-agent.exe, as `make release`
# builds it, on the HostProcess base image. That base is a few KB and runs
# on every Windows Server version: a HostProcess container runs on the
# host, so no base layer has to match the host's build
# (https://github.com/microsoft/windows-host-process-containers-base-image).
#
# Build it from the repository root, after `make release VERSION=vX.Y.Z`,
# with BuildKit on Linux (Docker Desktop cannot build this base); an image
# for Windows built on Linux can only COPY, never RUN:
#
#   docker buildx create --name hnsplan-win --use --platform windows/amd64   # once
#   docker buildx build --platform windows/amd64 -f deploy/images/agent-windows.Dockerfile \
#     -t ghcr.io/hnsplan/hnsplan-agent:vX.Y.Z --push .
#
# examples/deploy_images_test.go checks that AGENT names what `make
# release` writes and that the base is pinned by its tag.
FROM mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0

ARG AGENT=bin/release/hnsplan-agent-windows-amd64.exe
COPY ${AGENT} /hnsplan-agent.exe

LABEL org.opencontainers.image.source="https://github.com/hnsplan/hnsplan" \
      org.opencontainers.image.title="hnsplan-agent" \
      org.opencontainers.image.description="hnsplan-agent for a HostProcess DaemonSet (deploy/)"

# The DaemonSet passes `run` and its flags as args.
ENTRYPOINT ["hnsplan-agent.exe"]
