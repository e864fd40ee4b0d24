"""Every documented setting reaches the service that reads it, through the one operator file.

compose: `compose/streamtts.env` (`env_file:` of intake, edge and synth); k3s: the Secret
`streamtts-env` from `k3s/base/streamtts.env` (`envFrom`, after the ConfigMap). Each setting the
README documents for a service is written into that file with a value of its own, and the
service's rendered environment must hold that value, unless the deployment fixes the setting
(an address, a port, a path inside the image, its Redis user), listed here with the reason.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from . import compose_lite, kustomize_lite
from .test_compose import ENV, VARIANTS
from .tools import COMPOSE, K3S, REPO

SERVICES = ("intake", "edge", "synth")
README = REPO / "README.md"
# What compose.yaml's `environment:` fixes: it wins over the env file, on purpose.
COMPOSE_FIXED = {
    "REDIS_URL": "each service's own Redis user and password, from compose/.env",
    "INTAKE_HOST": "listen beyond the loopback", "EDGE_HOST": "listen beyond the loopback",
    "SYNTH_METRICS_HOST": "listen beyond the loopback",
    "INTAKE_PORT": "the proxy's upstream", "EDGE_PORT": "the proxy's upstream",
    "SYNTH_METRICS_PORT": "Prometheus's target",
    "FORWARDED_ALLOW_IPS": "the proxy's fixed address (STREAMTTS_PROXY_IP)",
    "KOKORO_MODEL_DIR": "the mount point of the host's KOKORO_MODEL_DIR",
    "SYNTH_CACHE_DIR": "the synth-cache volume",
    "SYNTH_BACKEND": "per host file (compose.cpu.yaml: onnx)",
    "SYNTH_GRACE_S": "below the stop grace period",
    "INTAKE_WYOMING_PORT": "the port intake publishes for Home Assistant (WYOMING_PORT on the host)",
}
# k3s: only the Redis URL is a pod's own `env:` (it wins over envFrom).
K3S_FIXED = {"REDIS_URL": "each service's own Redis user, from the passwords Secret",
             "WEBRTC_NODE_IP": "the node's address (downward API); WEBRTC_PUBLIC_IP, which wins, stays free"}


def documented_settings() -> dict[str, set[str]]:
    """The README's settings tables: service -> names ("All services" apply to each; rows for
    `streamtts up` or the command-line client only are not a service's)."""
    sections = re.split(r"^### ", README.read_text().split("## Settings", 1)[1], flags=re.M)
    shared: set[str] = set()
    per_service: dict[str, set[str]] = {}
    for section in sections[1:]:
        title, _, body = section.partition("\n")
        names = set()
        for row in re.findall(r"^\| (`[A-Z].*?) \| .*? \| (.*) \|$", body, re.M):
            if not row[1].startswith("`streamtts"):
                names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", row[0]))
        if title.strip() == "All services":
            shared = names
        elif title.strip() in SERVICES:
            per_service[title.strip()] = names
    assert set(per_service) == set(SERVICES), "the README has a settings table per service"
    return {name: names | shared for name, names in per_service.items()}


SETTINGS = documented_settings()


def operator_file(path: Path) -> None:
    """The operator's file with every documented setting given its own value."""
    names = sorted(set().union(*SETTINGS.values()))
    path.write_text("".join(f"{name}=set-{name.lower()}\n" for name in names))


def unreached(environment: dict[str, str], service: str, fixed: dict[str, str]) -> list[str]:
    return sorted(name for name in SETTINGS[service] - set(fixed)
                  if environment.get(name) != f"set-{name.lower()}")


def test_the_readme_documents_the_settings_that_carry_secrets() -> None:
    assert {"STREAMTTS_API_KEYS", "STREAMTTS_ADMIN_TOKEN"} <= SETTINGS["intake"]
    for service in SERVICES:
        assert {"ARCHIVE_URL", "ARCHIVE_S3_ACCESS_KEY", "ARCHIVE_S3_SECRET_KEY"} <= SETTINGS[service]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("service", SERVICES)
def test_compose_env_file_reaches_every_service(variant: str, service: str, tmp_path: Path) -> None:
    shutil.copytree(COMPOSE, tmp_path, dirs_exist_ok=True)
    operator_file(tmp_path / "streamtts.env")
    paths = [tmp_path / p.name for p in VARIANTS[variant]]
    model = compose_lite.config(paths, ENV)
    environment = compose_lite.service_environment(model, service, tmp_path)
    assert not unreached(environment, service, COMPOSE_FIXED)


def test_compose_fixes_only_what_it_documents_as_fixed() -> None:
    """What `environment:` sets beats the env file: only the deployment's own values may be there."""
    for variant in VARIANTS:
        services = compose_lite.config(VARIANTS[variant], ENV)["services"]
        for service in SERVICES:
            assert set(services[service]["environment"]) <= set(COMPOSE_FIXED), (variant, service)


def test_compose_example_env_file_is_the_documented_one(tmp_path: Path) -> None:
    """The example renders (and archives to the volume, as before), and the real file is ignored."""
    shutil.copytree(COMPOSE, tmp_path, dirs_exist_ok=True)
    shutil.copy(COMPOSE / "streamtts.env.example", tmp_path / "streamtts.env")
    model = compose_lite.config([tmp_path / "compose.yaml"], ENV)
    for service in SERVICES:
        environment = compose_lite.service_environment(model, service, tmp_path)
        assert environment["ARCHIVE_URL"] == "file:///var/lib/streamtts/archive"
    (tmp_path / "streamtts.env").unlink()
    with pytest.raises(FileNotFoundError, match="streamtts.env"):
        compose_lite.service_environment(model, "intake", tmp_path)
    assert "streamtts.env" in (COMPOSE / ".gitignore").read_text().split()


def test_compose_check_can_fail(tmp_path: Path) -> None:
    """Before the env file: a key in compose/.env never reached a service."""
    shutil.copytree(COMPOSE, tmp_path, dirs_exist_ok=True)
    operator_file(tmp_path / "streamtts.env")
    model = compose_lite.config([tmp_path / "compose.yaml"], ENV)
    for service in SERVICES:
        del model["services"][service]["env_file"]
    environment = compose_lite.service_environment(model, "intake", tmp_path)
    assert "STREAMTTS_API_KEYS" in unreached(environment, "intake", COMPOSE_FIXED)


def pod_environment(resources: list[dict[str, Any]], service: str) -> dict[str, str]:
    """A container's environment as the kubelet builds it: envFrom in order, then env."""
    [workload] = [r for r in resources if r["kind"] == "Deployment" and r["metadata"]["name"] == service]
    spec = workload["spec"]["template"]["spec"]["containers"][0]
    values: dict[str, str] = {}
    for source in spec.get("envFrom", []):
        kind = "ConfigMap" if "configMapRef" in source else "Secret"
        name = (source.get("configMapRef") or source["secretRef"])["name"]
        [obj] = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
        values.update(kustomize_lite._decoded_data(obj))
    for entry in spec.get("env", []):
        values[entry["name"]] = entry.get("value", "<from a reference>")
    return values


@pytest.fixture(scope="module")
def k3s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("k3s-settings") / "k3s"
    shutil.copytree(K3S, tree, ignore=shutil.ignore_patterns("secrets.env", "streamtts.env"))
    example = (tree / "base" / "secrets.env.example").read_text()
    (tree / "base" / "secrets.env").write_text(example.replace("replace-me", "test-value"))
    operator_file(tree / "base" / "streamtts.env")
    return tree


@pytest.mark.parametrize("overlay", ["jetson", "cpu"])
@pytest.mark.parametrize("service", SERVICES)
def test_k3s_secret_reaches_every_service(k3s_tree: Path, overlay: str, service: str) -> None:
    resources = kustomize_lite.render(k3s_tree / "overlays" / overlay)
    assert not unreached(pod_environment(resources, service), service, K3S_FIXED)


def test_k3s_needs_the_operators_settings_file(k3s_tree: Path, tmp_path: Path) -> None:
    tree = tmp_path / "k3s"
    shutil.copytree(k3s_tree, tree)
    (tree / "base" / "streamtts.env").unlink()
    with pytest.raises(FileNotFoundError, match="streamtts.env"):
        kustomize_lite.render(tree / "overlays" / "cpu")
