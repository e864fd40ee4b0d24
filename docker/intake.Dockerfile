# intake: validation, content ids and the claim (python -m intake). Build from the repo root:
#   docker build -f docker/intake.Dockerfile -t streamtts/intake .
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
# The project itself, with PyAV for /v1/audio/speech's formats and the S3 archive backend
# (ARCHIVE_URL=s3://...: /v1/audio/speech replays archived casts, as edge does), and aiortc for
# the live session over WebRTC (/v1/audio/speech/webrtc; media on WEBRTC_UDP_PORTS).
# Versions: constraints.txt, the ones the tests ran (scripts/refresh-constraints).
RUN pip install -c constraints.txt ".[intake,s3,webrtc]" && python3 -c "import castlog, chunking, fanout, intake, intake.speech.formats, intake.speech.webrtc, blobstore.s3"

FROM ${PYTHON_IMAGE} AS runtime
# The archive volume's mount point, owned as edge's and synth's are: whichever container mounts
# the empty volume first gives it this owner, and synth must be able to write there.
RUN useradd --system --no-log-init --uid 10001 --user-group --home-dir /nonexistent \
        --shell /usr/sbin/nologin streamtts \
    && mkdir -p /var/lib/streamtts/archive \
    && chown 10001:10001 /var/lib/streamtts/archive
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INTAKE_HOST=0.0.0.0 \
    INTAKE_PORT=8081
USER 10001:10001
# HTTP, and the media ports of WebRTC sessions (WEBRTC_UDP_PORTS' default)
EXPOSE 8081 40000-40100/udp
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('INTAKE_PORT', '8081'), timeout=2)"]
CMD ["python3", "-m", "intake"]
