"""docs/deploy.md points at files that exist and at the settings the files really use."""

from __future__ import annotations

import re

from .tools import COMPOSE, K3S, REPO

DEPLOY_MD = REPO / "docs" / "deploy.md"
# Files the operator creates; they are git-ignored on purpose.
OPERATOR_FILES = {"compose/.env", "k3s/base/secrets.env"}
PATH = re.compile(r"(?<![\w/.-])((?:compose|k3s|docker|tests/deploy|docs)/[\w./-]*[\w/])")


def test_every_path_in_the_guide_exists() -> None:
    paths = set(PATH.findall(DEPLOY_MD.read_text())) - OPERATOR_FILES
    assert "k3s/overlays/jetson" in paths
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing


def test_guide_names_every_setting_an_operator_sets() -> None:
    guide = DEPLOY_MD.read_text()
    settings = set()
    for path in (COMPOSE / ".env.example", K3S / "base" / "config.env"):
        settings |= set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", path.read_text(), re.M))
    missing = sorted(s for s in settings if f"`{s}`" not in guide)
    assert not missing
