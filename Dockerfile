# syntax=docker/dockerfile:1
# TenantPlatform operator image: `tenant-platform run` (kopf) as PID 1, as a non-root user, with a
# read-only root filesystem. Build from the repository root:
#
#   docker build -t tenant-platform-operator:0.2.0 .
#
# The version label, like the tag, follows tenant_platform.__version__ (tests/unit/test_version.py).
#
# Base image: an exact Python tag. To pin it by digest as well (recommended for releases), resolve
# the tag once and pass it with its digest; both stages use the same base:
#
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm   # prints "Digest: sha256:..."
#   docker build --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest> -t ... .
#
# Dependencies come only from requirements.lock (hack/lock.sh: exact versions, sha256 of every
# file), installed with --require-hashes; the project itself is then installed without
# dependencies and without build isolation, using the locked build backend.
# tests/packaging/test_install_steps.py runs these same steps in a fresh virtual environment.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY requirements.lock ./
RUN /opt/venv/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation . \
    && /opt/venv/bin/pip uninstall --yes setuptools wheel

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="tenant-platform-operator" \
      org.opencontainers.image.description="Kubernetes operator reconciling tenant prerequisites for multi-tenant AI platforms" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.2.0"
COPY --from=build /opt/venv /opt/venv
# HOME and TMPDIR point at /tmp, the only writable path (an emptyDir in the Deployment): kopf and
# the Kubernetes client write temporary CA and token files there.
# MALLOC_ARENA_MAX=2: glibc's allocator keeps at most two arenas for the process's threads
# instead of up to eight per core, which holds less freed memory (docs/performance.md: about 8 %
# less resident memory at 200 platforms, and a flatter slope).
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    TMPDIR=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
# 8080 metrics (/metrics), 8081 liveness (/healthz).
EXPOSE 8080 8081
# A numeric UID/GID (no /etc/passwd entry needed), so runAsNonRoot can verify it.
USER 65532:65532
# Exec form: tenant-platform (kopf) is PID 1 and receives SIGTERM directly. The default command
# is `tenant-platform run`; the Deployment passes `args: [run]`, and other subcommands
# (`check`, `render`) run from the same image.
ENTRYPOINT ["tenant-platform"]
CMD ["run"]
