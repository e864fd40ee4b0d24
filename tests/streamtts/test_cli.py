"""The command-line client against the real system: ``streamtts up`` with the real model, and
``streamtts say / follow / voices`` run as a user runs them (subprocesses, exit codes, files)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streamtts.client import voice_traits
from streamtts.redisserver import free_port

from .running import Up, cli, mp3_seconds, start_up

SHORT = "こんにちは。今日は良い天気です。"
# Long enough that a Ctrl-C comes while it is still being made, however late a loaded machine
# runs the test: 20 sentences, about 30 s of audio (6 were once all made before it came)
LONG = "".join(f"{n}番目の文です。" for n in range(1, 21))


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    running = start_up(tmp_path_factory.mktemp("cli"))
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_unreachable_server_is_exit_3_with_the_url_and_what_to_do(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for args in (("say", "Hello."), ("voices",), ("follow", "pHanHO6047OT")):
        done = cli(url, *args, cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        assert url in done.stderr and "streamtts up" in done.stderr and "--url" in done.stderr
        assert "Traceback" not in done.stderr
    env = dict(os.environ, STREAMTTS_URL=url)
    done = cli(None, "voices", cwd=tmp_path, env=env)
    assert done.returncode == 3 and url in done.stderr  # STREAMTTS_URL is the default


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    assert cli(None, "say", cwd=tmp_path).returncode == 2  # stdin is empty: nothing to say
    missing = cli(None, "say", "-f", str(tmp_path / "nope.txt"), cwd=tmp_path)
    assert missing.returncode == 2 and "nope.txt" in missing.stderr
    assert cli(None, "follow", "not-a-cast", cwd=tmp_path).returncode == 2
    assert cli(None, "frobnicate", cwd=tmp_path).returncode == 2


def test_voice_traits_come_from_the_id() -> None:
    assert voice_traits("jf_alpha") == ("Japanese", "female")
    assert voice_traits("am_adam") == ("American English", "male")
    assert voice_traits("custom") == ("?", "?")


@pytest.mark.model
@pytest.mark.timeout(600)
def test_say_writes_a_playable_mp3_and_a_repeat_is_a_cache_hit(up: Up, tmp_path: Path) -> None:
    first = cli(up.url, "say", SHORT, "-o", "first.mp3", "--title", "Greeting", cwd=tmp_path, timeout_s=300)
    assert first.returncode == 0, first.stderr
    assert f"{up.url}/c/" in first.stderr and "(new)" in first.stderr
    assert "2/2" in first.stderr and "done: 2 sentences" in first.stderr  # the progress bar's last state
    assert mp3_seconds(tmp_path / "first.mp3") > 1.0
    again = cli(up.url, "say", SHORT, "-o", "again.mp3", "--title", "Greeting", cwd=tmp_path)
    assert again.returncode == 0 and "cached" in again.stderr
    assert (tmp_path / "again.mp3").read_bytes() == (tmp_path / "first.mp3").read_bytes()
    # follow by the full link, with no --url: the link names the server
    link = next(word for word in first.stderr.split() if "/c/" in word)
    followed = cli(None, "follow", link, "-o", "followed.mp3", cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert (tmp_path / "followed.mp3").read_bytes() == (tmp_path / "first.mp3").read_bytes()
    live = cli(up.url, "follow", link, "--live", "-o", "live.mp3", cwd=tmp_path)  # ended: nothing more comes
    assert live.returncode == 0 and "done: 0 sentences" in live.stderr, live.stderr


@pytest.mark.model
def test_voices_lists_the_published_voices_with_the_default_marked(up: Up, tmp_path: Path) -> None:
    done = cli(up.url, "voices", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    published = httpx.get(f"{up.url}/api/voices").json()
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.count("│") >= 4}
    assert set(published["voices"]) <= set(rows)
    assert "*" in rows[published["default"]] and "Japanese" in rows["jf_alpha"]


@pytest.mark.model
def test_an_unknown_voice_is_a_clear_exit_2_and_writes_nothing(up: Up, tmp_path: Path) -> None:
    done = cli(up.url, "say", "Hello.", "-v", "xx_nobody", "-o", "x.mp3", cwd=tmp_path)
    assert done.returncode == 2
    assert "no such voice" in done.stderr and "jf_alpha" in done.stderr and "Traceback" not in done.stderr
    assert "`streamtts voices` lists them" in done.stderr
    assert not (tmp_path / "x.mp3").exists()


@pytest.mark.model
@pytest.mark.timeout(600)
def test_ctrl_c_stops_following_never_the_cast(up: Up, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "streamtts", "say", LONG, "-o", "long.mp3", "--url", up.url]
    # Ctrl-C as a terminal gives it: a runner started in the background (CI under `nohup ... &`)
    # passes SIGINT on ignored, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = tmp_path / "long.mp3"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not out.exists() or out.stat().st_size == 0):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal sends
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert b"the cast goes on" in err and b"Traceback" not in err
    link = next(word for word in err.decode().split() if "/c/" in word)
    cast_id = link.rsplit("/", 1)[-1].strip("`")
    state = httpx.get(f"{up.url}/api/casts/{cast_id}").json()
    assert state["status"] in ("generating", "queued", "done")
    resumed = cli(up.url, "follow", cast_id, "-o", "long-all.mp3", cwd=tmp_path, timeout_s=400)
    assert resumed.returncode == 0, resumed.stderr  # the cast went on to its end
    assert httpx.get(f"{up.url}/api/casts/{cast_id}").json()["status"] == "done"
    assert mp3_seconds(tmp_path / "long-all.mp3") > mp3_seconds(out)
