"""docs/deploy.md points at files that exist and at the settings the files really use."""

from __future__ import annotations

import re

from .tools import COMPOSE, K3S, REPO

DEPLOY_MD = REPO / "docs" / "deploy.md"
# Files the operator creates; they are git-ignored on purpose.
OPERATOR_FILES = {"compose/.env", "compose/streamtts.env", "k3s/base/secrets.env",
                  "k3s/base/streamtts.env"}
PATH = re.compile(r"(?<![\w/.-])((?:compose|k3s|docker|tests/deploy|docs)/[\w./-]*[\w/])")


def test_every_path_in_the_guide_exists() -> None:
    paths = set(PATH.findall(DEPLOY_MD.read_text())) - OPERATOR_FILES
    assert "k3s/overlays/jetson" in paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing


def test_guide_names_every_setting_an_operator_sets() -> None:
    guide = DEPLOY_MD.read_text()
    settings = set()
    for path in (COMPOSE / ".env.example", COMPOSE / "streamtts.env.example", K3S / "base" / "config.env",
                 K3S / "base" / "streamtts.env.example"):
        settings |= set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", path.read_text(), re.M))
    missing = sorted(s for s in settings if f"`{s}`" not in guide)
    assert not missing


def docker_builds(text: str) -> list[str]:
    """Every ``docker build`` command in a text, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [m.group(0) for m in re.finditer(r"docker build\s[^\n`]*", joined)]


def build_args(command: str) -> dict[str, str]:
    return dict(re.findall(r"--build-arg\s+([A-Z_]+)=(\S+)", command))


def test_torch_builds_install_kokoro() -> None:
    """A synth image with the torch extra or a GPU base needs hexgrad's kokoro (KOKORO_TORCH=true):
    without it the torch backend cannot start."""
    synth = [c for c in docker_builds(DEPLOY_MD.read_text()) if "synth.Dockerfile" in c]
    assert synth, "the guide shows how to build the synth image"
    for command in synth:
        args = build_args(command)
        torch = "torch" in args.get("EXTRAS", "") or "pytorch" in args.get("BASE_IMAGE", "")
        assert not torch or args.get("KOKORO_TORCH") == "true", command


def test_build_args_in_the_guide_exist_in_the_dockerfiles() -> None:
    for command in docker_builds(DEPLOY_MD.read_text()):
        dockerfile = re.search(r"-f\s+(\S+)", command)
        assert dockerfile, command
        declared = set(re.findall(r"^ARG\s+([A-Z_]+)", (REPO / dockerfile.group(1)).read_text(), re.M))
        assert set(build_args(command)) <= declared, command


def test_torch_check_can_fail() -> None:
    bad = "docker build -f docker/synth.Dockerfile --build-arg EXTRAS=synth,torch ."
    args = build_args(docker_builds(bad)[0])
    assert "torch" in args["EXTRAS"] and "KOKORO_TORCH" not in args
