"""Settings from the environment: every limit has a name and a default; bad values are refused
with the variable's name."""

from __future__ import annotations

import pytest

from servicekit import ConfigError
from synth.config import SynthConfig


def test_defaults_match_the_documented_limits() -> None:
    cfg = SynthConfig.from_env({})
    assert (cfg.redis_url, cfg.metrics_host, cfg.metrics_port) == ("redis://127.0.0.1:6379/0", "127.0.0.1", 9100)
    assert (cfg.backend, cfg.model_dir, cfg.cache_dir, cfg.threads) == ("auto", None, None, None)
    assert (cfg.default_voice, cfg.bitrate, cfg.first_mp3_quality) == ("", 48_000, 6)  # voice unset: af_heart if there
    assert cfg.onnx_spin is False
    assert (cfg.max_active, cfg.admit_headroom, cfg.capacity_measure_s) == (6, 0.7, 10.0)
    assert (cfg.lease_s, cfg.max_attempts, cfg.grace_s) == (60.0, 3, 30.0)
    assert cfg.refresh_s == 20.0
    assert "-" in cfg.consumer  # hostname-pid


def test_environment_overrides_every_setting() -> None:
    cfg = SynthConfig.from_env(
        {
            "REDIS_URL": "redis://r:1/2", "SYNTH_CONSUMER": "box-1", "SYNTH_METRICS_HOST": "0.0.0.0",
            "SYNTH_METRICS_PORT": "9200", "SYNTH_BACKEND": "ONNX", "KOKORO_MODEL_DIR": "/m",
            "SYNTH_CACHE_DIR": "/c", "SYNTH_THREADS": "4", "SYNTH_DEFAULT_VOICE": "jf_alpha",
            "SYNTH_BITRATE": "64000", "SYNTH_MAX_ACTIVE": "10", "SYNTH_ADMIT_HEADROOM": "0.5",
            "SYNTH_LEASE_S": "2", "SYNTH_MAX_ATTEMPTS": "4", "SYNTH_RETRY_BACKOFF_S": "0.5",
            "SYNTH_GRACE_S": "10", "SYNTH_FIRST_MP3_QUALITY": "3", "SYNTH_ONNX_SPIN": "on",
        }
    )
    assert cfg.redis_url == "redis://r:1/2" and cfg.consumer == "box-1"
    assert (cfg.metrics_host, cfg.metrics_port, cfg.backend) == ("0.0.0.0", 9200, "onnx")
    assert (cfg.model_dir, cfg.cache_dir, cfg.threads, cfg.default_voice) == ("/m", "/c", 4, "jf_alpha")
    assert (cfg.bitrate, cfg.max_active, cfg.admit_headroom) == (64_000, 10, 0.5)
    assert (cfg.lease_s, cfg.lease_ms, cfg.max_attempts, cfg.grace_s) == (2.0, 2000, 4, 10.0)
    assert [cfg.backoff_s(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert cfg.first_mp3_quality == 3 and cfg.onnx_spin is True


@pytest.mark.parametrize(
    ("name", "value"),
    [("SYNTH_BACKEND", "tpu"), ("SYNTH_MAX_ACTIVE", "0"), ("SYNTH_LEASE_S", "soon"), ("SYNTH_MAX_ATTEMPTS", "0"),
     ("SYNTH_THREADS", "four"), ("SYNTH_THREADS", "0"), ("SYNTH_METRICS_PORT", "x"),
     ("SYNTH_FIRST_MP3_QUALITY", "-1"), ("SYNTH_FIRST_MP3_QUALITY", "10")],
)
def test_bad_values_are_refused_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        SynthConfig.from_env({name: value})


@pytest.mark.parametrize(
    ("name", "value", "instead"),
    [("SYNTH_ADMISSION", "even", "measured capacity"), ("SYNTH_ADMISSION", "capacity", "measured capacity"),
     ("SYNTH_CONCURRENCY", "3", "SYNTH_MAX_ACTIVE"), ("SYNTH_LEAD_THRESHOLD_S", "15", "SYNTH_ADMIT_HEADROOM"),
     ("SYNTH_FIRST_AUDIO_TARGET_S", "0.5", "measured speed")],
)
def test_a_removed_setting_still_set_refuses_to_start_naming_it_and_what_replaced_it(
    name: str, value: str, instead: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{name} was removed: .*{instead}.*; unset it$"):
        SynthConfig.from_env({name: value})
    assert SynthConfig.from_env({name: " "}).max_active == 6  # blank is unset, as for any setting


def test_log_level_falls_back_to_the_generic_variable_and_blanks_mean_unset() -> None:
    assert SynthConfig.from_env({"LOG_LEVEL": "debug"}).log_level == "DEBUG"
    assert SynthConfig.from_env({"LOG_LEVEL": "debug", "SYNTH_LOG_LEVEL": "warning"}).log_level == "WARNING"
    cfg = SynthConfig.from_env({"SYNTH_LOG_LEVEL": " ", "KOKORO_MODEL_DIR": "  ", "SYNTH_THREADS": ""})
    assert (cfg.log_level, cfg.model_dir, cfg.threads) == ("INFO", None, None)
