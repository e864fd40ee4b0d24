"""constraints.txt ties the images to the versions the tests ran: every Dockerfile and CI's pip
installs use it, it matches the installed versions of this interpreter, and it forces nothing
that a base image or CI brings on its own (CUDA torch, a local CPU torch, kokoro --no-deps)."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from .test_dockerfiles import SERVICES, dockerfile, instructions
from .tools import DOCKER, REPO

CONSTRAINTS = REPO / "constraints.txt"
REFRESH = REPO / "scripts" / "refresh-constraints"
LINE = re.compile(r'^([a-z0-9][a-z0-9.-]*)==(\S+?)(?: ; python_version == "(\d+\.\d+)")?$')


def pins(path: Path = CONSTRAINTS) -> dict[tuple[str, str | None], str]:
    """(name, python version or None) -> version."""
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            match = LINE.match(line)
            assert match, f"not name==version [; python_version == X.Y]: {line}"
            out[match.group(1), match.group(3)] = match.group(2)
    return out


def this_python() -> str:
    return "%d.%d" % sys.version_info[:2]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_image_installs_with_the_constraints(service: str) -> None:
    steps = instructions(dockerfile(service))
    copied = " ".join(a for w, a in steps if w == "COPY" and "--from" not in a)
    assert "constraints.txt" in copied
    installs = [a for w, a in steps if w == "RUN" and re.search(r'pip install [^&]*"\.\[', a)]
    assert installs
    for run in installs:
        assert re.search(r"pip install -c \S*constraints\.txt", run), run


def test_ci_installs_with_the_constraints() -> None:
    script = (REPO / "scripts" / "test").read_text()
    project = [line for line in script.splitlines() if "pip_install" in line and "-e '." in line]
    assert len(project) == 2 and all("-c constraints.txt" in line for line in project)


def test_constraints_are_the_versions_this_install_resolved() -> None:
    """What scripts/refresh-constraints wrote for this Python is what is installed here."""
    here = this_python()
    mine = {name: v for (name, py), v in pins().items() if py in (None, here)}
    assert mine, f"constraints.txt has no pins for Python {here}: run scripts/refresh-constraints"
    differ = {name: (v, metadata.version(name)) for name, v in mine.items() if metadata.version(name) != v}
    assert not differ, f"stale: run scripts/refresh-constraints ({differ})"


def test_nothing_a_base_image_or_ci_brings_is_forced() -> None:
    names = {name for name, _ in pins()}
    assert not names & {"torch", "torchaudio", "torchvision", "triton", "kokoro", "streamtts"}
    assert not {n for n in names if n.startswith("nvidia-")}


def test_refresh_reproduces_the_file_for_this_python(tmp_path: Path) -> None:
    """The script's walk of this interpreter gives the lines already there for it."""
    out = tmp_path / "constraints.txt"
    done = subprocess.run([sys.executable, str(REFRESH), "--out", str(out), sys.executable], capture_output=True,
                          text=True, check=False, env={"PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    fresh = {name: v for (name, py), v in pins(out).items()}
    expected = {name: v for (name, py), v in pins().items() if py in (None, this_python())}
    assert fresh == expected


def test_a_gpu_base_keeps_its_own_numpy(tmp_path: Path) -> None:
    """pin-base-packages.py: the base's numpy (here: this interpreter's) first, constraints.txt's
    numpy dropped, everything else passed on."""
    fake = tmp_path / "constraints.txt"
    fake.write_text('# header\nnumpy==0.0.1 ; python_version == "3.10"\nredis==1.2.3\n')
    done = subprocess.run([sys.executable, str(DOCKER / "pin-base-packages.py"), str(fake)],
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert f"numpy=={metadata.version('numpy')}" in lines
    assert "redis==1.2.3" in lines and not any(line.startswith("numpy==0.0.1") for line in lines)
