# synth: the Kokoro worker (python -m synth). Build from the repo root; the base image picks the
# hardware (compose passes these):
#   Jetson, JetPack 6:   BASE_IMAGE=nvcr.io/nvidia/pytorch:24.08-py3-igpu          KOKORO_TORCH=true
#   x86-64 + NVIDIA:     BASE_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime  KOKORO_TORCH=true
#   CPU only (default):  BASE_IMAGE=python:3.11.11-slim-bookworm                   KOKORO_TORCH=false
# Packages go to a user base (/opt/streamtts) on top of the base image's Python, so its CUDA
# torch stays in use; both stages use the same base image.
ARG BASE_IMAGE=python:3.11.11-slim-bookworm
ARG NODE_IMAGE=node:22.11.0-bookworm-slim

# Kokoro's 54 voice packs (English and more) from hexgrad's npm package; checked below.
FROM ${NODE_IMAGE} AS voices
WORKDIR /voices
RUN npm pack kokoro-js@1.2.1 --silent \
    && tar -xzf kokoro-js-1.2.1.tgz package/voices \
    && rm kokoro-js-1.2.1.tgz

FROM ${BASE_IMAGE} AS build
# The project's extras: `synth` is the model's audio path and the onnx backend.
ARG EXTRAS=synth
# true: add hexgrad's KModel, the torch engine (torch itself comes with the base image).
ARG KOKORO_TORCH=false
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_USER=1 \
    PYTHONUSERBASE=/opt/streamtts
WORKDIR /src
COPY docker/pin-base-packages.py /tmp/
COPY pyproject.toml README.md* constraints.txt ./
COPY libs/ libs/
COPY services/ services/
# The project itself, at the versions the tests ran (constraints.txt; the base image's own torch
# and numpy win over it).
RUN python3 /tmp/pin-base-packages.py constraints.txt > /tmp/base-constraints.txt \
    && python3 -m pip install -c /tmp/base-constraints.txt ".[${EXTRAS},s3]" \
    && python3 -c "import castlog, chunking, fanout, synth"
# kokoro's own dependencies pull spaCy and phonemizer for a pipeline synth does not use: install
# it without them, plus what its KModel imports (services/synth/model/kmodel.py says the same).
RUN if [ "${KOKORO_TORCH}" = true ]; then \
        PIP_CONSTRAINT=/tmp/base-constraints.txt python3 -m pip install --no-deps kokoro==0.9.4 \
        && PIP_CONSTRAINT=/tmp/base-constraints.txt python3 -m pip install \
            loguru==0.7.3 transformers==4.46.3 huggingface-hub==0.26.5 \
        && python3 -c "from synth.model.kmodel import kmodel_class; kmodel_class()"; \
    fi
# The voice packs, each checked against the SHA-256 table in the repository, into SYNTH_VOICES_DIR.
COPY --from=voices /voices/package/voices /tmp/kokoro-js-voices
RUN KOKORO_MODEL_DIR=/opt/streamtts/kokoro python3 -m streamtts voices install --from /tmp/kokoro-js-voices

FROM ${BASE_IMAGE} AS runtime
RUN useradd --system --no-log-init --uid 10001 --user-group --home-dir /nonexistent \
        --shell /usr/sbin/nologin streamtts \
    && mkdir -p /var/cache/streamtts /var/lib/streamtts/archive \
    && chown 10001:10001 /var/cache/streamtts /var/lib/streamtts/archive
COPY --from=build /opt/streamtts /opt/streamtts
# Every cache goes to the writable SYNTH_CACHE_DIR volume: the root filesystem is read-only and
# the weights come from KOKORO_MODEL_DIR or the installed packages, never from the network.
ENV PYTHONUSERBASE=/opt/streamtts \
    PATH=/opt/streamtts/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SYNTH_METRICS_HOST=0.0.0.0 \
    SYNTH_METRICS_PORT=9100 \
    SYNTH_CACHE_DIR=/var/cache/streamtts \
    KOKORO_MODEL_DIR=/models/kokoro \
    SYNTH_VOICES_DIR=/opt/streamtts/kokoro/voices \
    XDG_CACHE_HOME=/var/cache/streamtts/xdg \
    CUDA_CACHE_PATH=/var/cache/streamtts/cuda \
    HF_HUB_OFFLINE=1
USER 10001:10001
EXPOSE 9100
# Loading and warming the model takes a while, above all on a Jetson: a long start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('SYNTH_METRICS_PORT', '9100'), timeout=4)"]
CMD ["python3", "-m", "synth"]
