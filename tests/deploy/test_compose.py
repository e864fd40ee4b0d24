"""compose/: each host variant merges, validates against the Compose spec, keeps its promises."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest

from . import compose_lite
from .dashboard import DASHBOARD
from .tools import COMPOSE, REDIS_FILES, REPO, assert_patched_redis, require_tool, run

BASE = COMPOSE / "compose.yaml"
VARIANTS = {
    "jetson": [BASE],
    "x86-gpu": [BASE, COMPOSE / "compose.x86-gpu.yaml"],
    "cpu": [BASE, COMPOSE / "compose.cpu.yaml"],
}
# What an operator puts in compose/.env; the values only need the right shape.
ENV = {
    "REDIS_PASSWORD_INTAKE": "intake-password-000001",
    "REDIS_PASSWORD_EDGE": "edge-password-0000002",
    "REDIS_PASSWORD_SYNTH": "synth-password-000003",
    "REDIS_PASSWORD_ADMIN": "admin-password-000004",
    "GRAFANA_ADMIN_PASSWORD": "grafana-password-05",
    "KOKORO_MODEL_DIR": "/srv/kokoro",
}
SYNTH_GRACE_S = 30
PINNED = re.compile(r"^[\w./-]+(:v?\d[\w.-]*|@sha256:[0-9a-f]{64})$")  # a version tag or a digest
SERVICE_PORTS = {"intake": 8081, "edge": 8082, "synth": 9100}


def model(variant: str, **env: str) -> dict[str, Any]:
    return compose_lite.config(VARIANTS[variant], {**ENV, **env})


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def check_compose_spec(path: Path) -> None:
    result = run([require_tool("check-jsonschema", "pip install check-jsonschema"),
                  "--builtin-schema", "vendor.compose-spec", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_file_validates_as_written() -> None:
    check_compose_spec(BASE)


def test_merged_variant_validates(variant: str, tmp_path: Path) -> None:
    merged = tmp_path / f"compose.{variant}.json"
    merged.write_text(json.dumps(model(variant)))
    check_compose_spec(merged)


def test_schema_check_can_fail(tmp_path: Path) -> None:
    broken = model("jetson")
    broken["services"]["redis"]["healthcheck"]["interval"] = ["5s"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(AssertionError):
        check_compose_spec(path)


@pytest.mark.parametrize("name", ["REDIS_PASSWORD_INTAKE", "REDIS_PASSWORD_EDGE",
                                  "REDIS_PASSWORD_SYNTH", "REDIS_PASSWORD_ADMIN",
                                  "GRAFANA_ADMIN_PASSWORD"])
def test_every_secret_must_be_set(name: str) -> None:
    with pytest.raises(compose_lite.InterpolationError, match=name):
        compose_lite.config(VARIANTS["jetson"], {k: v for k, v in ENV.items() if k != name})
    with pytest.raises(compose_lite.InterpolationError, match=name):
        compose_lite.config(VARIANTS["jetson"], {**ENV, name: ""})


def test_env_example_names_every_variable_the_files_use() -> None:
    example = (COMPOSE / ".env.example").read_text()
    used = set()
    for path in COMPOSE.glob("compose*.yaml"):
        used |= set(re.findall(r"\$\{([A-Z0-9_]+)", path.read_text()))
    missing = {name for name in used if not re.search(rf"^#? ?{name}=", example, re.M)}
    assert not missing


def test_services_connect_as_their_own_redis_user(variant: str) -> None:
    services = model(variant)["services"]
    for name in ("intake", "edge", "synth"):
        url = services[name]["environment"]["REDIS_URL"]
        password = ENV[f"REDIS_PASSWORD_{name.upper()}"]
        assert url == f"redis://{name}:{password}@redis:6379/0"


def test_redis_is_private_durable_and_checked(variant: str) -> None:
    config = model(variant)
    redis = config["services"]["redis"]
    assert "ports" not in redis
    assert config["networks"]["backend"]["internal"] is True
    assert redis["networks"] == ["backend"]
    data = [v for v in redis["volumes"] if v["target"] == "/data"]
    assert data and data[0]["type"] == "volume" and data[0]["source"] in config["volumes"]
    assert redis["environment"]["REDIS_APPENDFSYNC"] == "always"
    assert redis["healthcheck"]["test"] == [
        "CMD-SHELL", 'REDISCLI_AUTH="$REDIS_PASSWORD_ADMIN" redis-cli --user admin ping | grep -qx PONG']
    assert_patched_redis(redis["image"])
    conf = (REDIS_FILES / "redis.conf").read_text()
    assert re.search(r"^appendonly yes$", conf, re.M)
    assert re.search(r"^maxmemory-policy noeviction$", conf, re.M)


def test_appendfsync_is_configurable() -> None:
    redis = model("jetson", REDIS_APPENDFSYNC="everysec")["services"]["redis"]
    assert redis["environment"]["REDIS_APPENDFSYNC"] == "everysec"


def test_only_the_proxy_is_public(variant: str) -> None:
    services = model(variant)["services"]
    published = {name for name, s in services.items() if s.get("ports")}
    assert published == {"proxy", "prometheus", "grafana", "intake"}
    assert services["proxy"]["ports"] == ["8080:8080"]
    # intake publishes only WebRTC's media and its Wyoming port (raw TCP)
    assert services["intake"]["ports"] == ["40000-40100:40000-40100/udp", "10210:10210"]
    for name in ("prometheus", "grafana"):
        assert all(p.startswith("127.0.0.1:") for p in services[name]["ports"])
        assert services[name]["profiles"] == ["observability"]


def test_services_listen_beyond_their_loopback(variant: str) -> None:
    env = {name: s.get("environment", {}) for name, s in model(variant)["services"].items()}
    assert env["intake"]["INTAKE_HOST"] == env["edge"]["EDGE_HOST"] == "0.0.0.0"
    assert env["synth"]["SYNTH_METRICS_HOST"] == "0.0.0.0"


def test_services_trust_only_the_proxy_for_client_addresses(variant: str) -> None:
    config = model(variant)
    services = config["services"]
    proxy_ip = services["proxy"]["networks"]["backend"]["ipv4_address"]
    [subnet] = [c["subnet"] for c in config["networks"]["backend"]["ipam"]["config"]]
    assert ipaddress.ip_address(proxy_ip) in ipaddress.ip_network(subnet)
    for name in ("intake", "edge"):
        assert services[name]["environment"]["FORWARDED_ALLOW_IPS"] == proxy_ip


def test_services_wait_for_a_healthy_redis(variant: str) -> None:
    services = model(variant)["services"]
    for name in ("intake", "edge", "synth"):
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_edge_scales(variant: str) -> None:
    edge = model(variant)["services"]["edge"]
    assert "container_name" not in edge
    assert int(edge["deploy"]["replicas"]) >= 2


def _gpu_devices(synth: dict[str, Any]) -> list[dict[str, Any]]:
    return synth.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])


@pytest.mark.parametrize(
    ("variant", "runtime", "gpu", "backend", "base_image"),
    [
        ("jetson", "nvidia", True, "torch", "nvcr.io/nvidia/pytorch:24.08-py3-igpu"),
        ("x86-gpu", None, True, "torch", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"),
        ("cpu", None, False, "onnx", "python:3.11.11-slim-bookworm"),
    ],
)
def test_synth_hardware(variant: str, runtime: str | None, gpu: bool, backend: str,
                        base_image: str) -> None:
    synth = model(variant)["services"]["synth"]
    assert synth.get("runtime") == runtime
    devices = _gpu_devices(synth)
    assert bool(devices) == gpu
    for device in devices:
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert synth["environment"]["SYNTH_BACKEND"] == backend
    assert synth["build"]["args"]["BASE_IMAGE"] == base_image
    # The torch backend needs hexgrad's KModel in the image; the onnx one does not.
    assert synth["build"]["args"]["KOKORO_TORCH"] == ("true" if gpu else "false")
    assert synth["image"].endswith(f"-{variant.replace('x86-gpu', 'cuda')}")


def test_model_weights_are_mounted_read_only(variant: str) -> None:
    synth = model(variant)["services"]["synth"]
    [mount] = [v for v in synth["volumes"] if v["target"] == "/models/kokoro"]
    assert mount["type"] == "bind"
    assert mount["source"] == ENV["KOKORO_MODEL_DIR"]
    assert mount["read_only"] is True
    assert synth["environment"]["KOKORO_MODEL_DIR"] == "/models/kokoro"


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def test_synth_gets_longer_than_its_grace_to_stop(variant: str) -> None:
    synth = model(variant)["services"]["synth"]
    assert int(synth["environment"]["SYNTH_GRACE_S"]) == SYNTH_GRACE_S
    assert _seconds(synth["stop_grace_period"]) > SYNTH_GRACE_S


def test_services_are_hardened(variant: str) -> None:
    services = model(variant)["services"]
    for name in ("intake", "edge", "synth"):
        service = services[name]
        assert service["read_only"] is True
        assert service["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in service["security_opt"]
        # intake publishes the Wyoming port itself (raw TCP, no proxy): it joins the frontend too
        assert service["networks"] == (["backend", "frontend"] if name == "intake" else ["backend"])
    assert "backend" in services["proxy"]["networks"]


def test_images_are_pinned(variant: str) -> None:
    services = model(variant)["services"]
    for name, service in services.items():
        if "build" in service:
            assert service["image"].startswith("streamtts/"), name
            for arg, value in service["build"].get("args", {}).items():
                if arg.endswith("IMAGE"):
                    assert PINNED.match(value), (name, value)
        else:
            assert PINNED.match(service["image"]), (name, service["image"])
            assert ":latest" not in service["image"]


def test_builds_use_the_dockerfiles_in_docker() -> None:
    for name, service in model("jetson")["services"].items():
        if "build" in service:
            context = (COMPOSE / service["build"]["context"]).resolve()
            assert context == REPO
            dockerfile = context / service["build"]["dockerfile"]
            assert dockerfile.is_file(), name
            declared = set(re.findall(r"^ARG (\w+)", dockerfile.read_text(), re.M))
            assert set(service["build"].get("args", {})) <= declared, name


def test_bind_mounts_exist_in_the_repo(variant: str) -> None:
    for name, service in model(variant)["services"].items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind" and volume["target"] != "/models/kokoro":
                assert (COMPOSE / volume["source"]).exists(), (name, volume["source"])


def test_observability_profile_shows_the_dashboard() -> None:
    services = model("jetson")["services"]
    grafana = services["grafana"]
    mounts = {v["target"]: COMPOSE / v["source"] for v in grafana["volumes"] if v["type"] == "bind"}
    home = Path(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    host_dir = mounts[str(home.parent)]
    assert (host_dir / home.name).resolve() == DASHBOARD
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"

    import yaml

    provisioning = mounts["/etc/grafana/provisioning"]
    providers = yaml.safe_load((provisioning / "dashboards" / "streamtts.yaml").read_text())
    [provider] = providers["providers"]
    assert provider["options"]["path"] == str(home.parent)
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    [datasource] = datasources["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = json.loads(DASHBOARD.read_text())
    [variable] = [v for v in dashboard["templating"]["list"] if v["name"] == "datasource"]
    assert variable["current"]["value"] == datasource["uid"]


def test_prometheus_config_is_valid_and_scrapes_every_service() -> None:
    import yaml

    config = COMPOSE / "prometheus" / "prometheus.yml"
    promtool = require_tool("promtool", "apt-get install prometheus")
    result = run([promtool, "check", "config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    services = model("jetson")["services"]
    for name, port in SERVICE_PORTS.items():
        [sd] = jobs[name]["dns_sd_configs"]
        assert sd["names"] == [name] and sd["port"] == port
        assert str(port) in services[name]["expose"]


def test_secrets_are_git_ignored() -> None:
    for path in ("compose/.env", "compose/streamtts.env", "k3s/base/secrets.env", "k3s/base/streamtts.env"):
        result = run(["git", "-C", str(REPO), "check-ignore", "-q", path])
        assert result.returncode == 0, f"{path} is not git-ignored"
    for path in ("compose/.env.example", "compose/streamtts.env.example", "k3s/base/secrets.env.example",
                 "k3s/base/streamtts.env.example"):
        result = run(["git", "-C", str(REPO), "check-ignore", "-q", path])
        assert result.returncode == 1, f"{path} should be committed"


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_has_a_memory_limit(variant: str) -> None:
    config = model(variant)
    for name, service in config["services"].items():
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert limits.get("memory"), f"{variant}: {name} has no memory limit"


@pytest.mark.parametrize("variant", VARIANTS)
def test_proxy_waits_for_healthy_services(variant: str) -> None:
    needs = model(variant)["services"]["proxy"]["depends_on"]
    assert {name: need["condition"] for name, need in needs.items()} == {
        "intake": "service_healthy", "edge": "service_healthy"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_synth_edge_and_intake_share_the_archive(variant: str) -> None:
    services = model(variant)["services"]
    for name in ("synth", "edge", "intake"):
        mounts = {v["target"]: v["source"] for v in services[name]["volumes"] if v["type"] == "volume"}
        assert mounts.get("/var/lib/streamtts/archive") == "archive"
    # ARCHIVE_URL comes from compose/streamtts.env (test_settings_reach.py)
    assert services["redis"]["environment"]["REDIS_MAXMEMORY"] == "auto"


@pytest.mark.rule("webrtc-ports")
def test_intake_publishes_its_webrtc_ports_as_the_same_numbers(variant: str) -> None:
    """The candidates name the container's ports: the host must publish those numbers, all of
    WEBRTC_UDP_PORTS' default (intake's Config), over UDP."""
    from intake.config import Config

    first, last = Config().webrtc_udp_ports
    assert f"{first}-{last}:{first}-{last}/udp" in model(variant)["services"]["intake"]["ports"]
