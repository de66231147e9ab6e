# syntax=docker/dockerfile:1
# The gpufleet operator image: `make image` (needs a Docker engine with BuildKit).
# The builder stage turns the package and its core dependencies, pinned by constraints.txt,
# into wheels; the runtime stage installs them offline. So the image carries what
# `gpufleet run` imports and nothing else: no compiler, no build backend, no extra (the
# simulator's and the dev tools' packages are in the sim and dev extras, never installed here).

FROM python:3.11-slim AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY operator/ operator/
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip wheel --wheel-dir /wheels --constraint constraints.txt /wheels/gpufleet-*.whl

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN groupadd --system --gid 10001 gpufleet \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpufleet
# Bind mounts keep the wheels out of the image's layers.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    --mount=type=bind,source=constraints.txt,target=/tmp/constraints.txt \
    pip install --no-index --find-links /wheels --constraint /tmp/constraints.txt gpufleet \
 && gpufleet run --help > /dev/null
# Numeric, so the kubelet can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
# 8080: the operator's /metrics; 8081: /healthz and /readyz.
EXPOSE 8080 8081
ENTRYPOINT ["gpufleet", "run"]
