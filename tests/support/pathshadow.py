"""A PATH without some commands (``redis-server``), everything else kept: a machine before an
apt-get install, for a test that must not find a binary that this machine has."""

from __future__ import annotations

import os
from pathlib import Path


def path_without(path: str, names: set[str], shadow_root: Path) -> str:
    """``path`` with every folder that holds one of ``names`` replaced by a folder of links to
    all its other entries."""
    out = []
    for n, folder in enumerate(p for p in path.split(os.pathsep) if p):
        entries = set(os.listdir(folder)) if os.path.isdir(folder) else set()
        if not entries & names:
            out.append(folder)
            continue
        shadow = shadow_root / str(n)
        shadow.mkdir(parents=True, exist_ok=True)
        for entry in entries - names:
            (shadow / entry).symlink_to(Path(folder) / entry)
        out.append(str(shadow))
    return os.pathsep.join(out)
