"""English voices without npm: ``streamtts voices install --from npm`` (and ``up``'s first start)
fetch kokoro-js's tarball from the npm registry over HTTPS when no npm binary is on PATH, check it
against the pinned SHA-512 and every pack against the SHA-256 table, and keep the tarball in the
user's cache (one download per machine: this test's network use)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from streamtts import voicecmd, voicepacks
from synth.model.voices import load_voices
from tests.deploy.tools import respond, stub_server


def path_without_npm() -> str:
    """This PATH minus every folder that holds an npm (Debian's is in /usr/bin)."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not (Path(f) / "npm").exists())


def install(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamtts", "voices", "install", "--from", "npm", *args],
                          capture_output=True, text=True, timeout=600, env=env, check=False)


@pytest.fixture
def no_npm(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("PATH", path_without_npm())
    monkeypatch.delenv(voicepacks.REGISTRY_ENV, raising=False)
    monkeypatch.delenv("KOKORO_MODEL_DIR", raising=False)
    assert shutil.which("npm") is None
    return dict(os.environ)


@pytest.mark.timeout(900)
def test_without_npm_the_registry_tarball_installs_checked_packs(no_npm: dict[str, str], tmp_path: Path) -> None:
    done = install("--only", "af_heart,bm_george", "--state-dir", str(tmp_path), env=no_npm)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "kokoro" / "voices"
    assert voicepacks.installed(folder) == ["af_heart", "bm_george"]
    known = voicepacks.known_packs()
    assert hashlib.sha256((folder / "af_heart.bin").read_bytes()).hexdigest() == known["af_heart"]
    cached = voicepacks.tarball_cache()
    assert cached.is_file() and voicepacks.tarball_ok(cached)  # the next install reads no network


@pytest.mark.timeout(900)
def test_up_first_start_without_npm_gets_af_heart(no_npm: dict[str, str], tmp_path: Path) -> None:
    """What `streamtts up` runs before it starts synth, on a machine without npm."""
    voicecmd.first_start(tmp_path)
    bank = load_voices(voicepacks.model_dir(tmp_path))
    assert "af_heart" in bank.names() and len(voicepacks.installed(tmp_path / "kokoro" / "voices")) == 54
    assert bank.style("af_heart", 10).shape == (256,)


def fake_tarball() -> bytes:
    """A tarball in kokoro-js's layout whose af_heart is not Kokoro's."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        body = bytes(64)
        info = tarfile.TarInfo("package/voices/af_heart.bin")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return data.getvalue()


def test_a_tarball_that_is_not_the_package_is_refused_and_not_kept(no_npm: dict[str, str], tmp_path: Path) -> None:
    """A mirror (npm_config_registry) serving something else: refused, nothing written or cached."""
    asked: list[str] = []

    def handle(request: BaseHTTPRequestHandler) -> None:
        asked.append(request.path)
        respond(request, 200, fake_tarball(), "application/octet-stream")

    with stub_server(handle) as port:
        env = {**no_npm, voicepacks.REGISTRY_ENV: f"http://127.0.0.1:{port}/", "XDG_CACHE_HOME": str(tmp_path / "cache")}
        done = install("--only", "af_heart", "--state-dir", str(tmp_path / "state"), env=env)
    assert asked == ["/kokoro-js/-/kokoro-js-1.2.1.tgz"]
    assert done.returncode == 1 and "SHA-512" in done.stderr and "nothing was installed" in done.stderr
    assert voicepacks.installed(tmp_path / "state" / "kokoro" / "voices") == []
    assert list((tmp_path / "cache" / "streamtts").iterdir()) == []
