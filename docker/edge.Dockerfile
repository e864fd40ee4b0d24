# edge: the public read path, pages, SSE and live MP3 (python -m edge). Build from the repo root:
#   docker build -f docker/edge.Dockerfile -t streamtts/edge .
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md* constraints.txt ./
COPY libs/ libs/
COPY services/ services/
# s3: the archive's S3 backend (ARCHIVE_URL=s3://...). Versions: constraints.txt, the ones the
# tests ran (scripts/refresh-constraints).
RUN pip install -c constraints.txt ".[s3]" && python3 -c "import castlog, fanout, edge, blobstore.s3"

FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --system --no-log-init --uid 10001 --user-group --home-dir /nonexistent \
        --shell /usr/sbin/nologin streamtts \
    && mkdir -p /var/lib/streamtts/archive \
    && chown 10001:10001 /var/lib/streamtts/archive
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EDGE_HOST=0.0.0.0 \
    EDGE_PORT=8082
USER 10001:10001
EXPOSE 8082
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('EDGE_PORT', '8082'), timeout=2)"]
CMD ["python3", "-m", "edge"]
