"""Import every module of the project: proves it loads on this interpreter (CI runs it on 3.10)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Modules that need an optional backend which this environment may lack (torch on CPU-only CI).
OPTIONAL = {"synth.model.torch_backend", "synth.model.convert"}


def main() -> int:
    failed = 0
    count = 0
    for folder in ("libs", "services"):
        for info in pkgutil.walk_packages([str(ROOT / folder)]):
            if info.name.endswith("__main__"):
                continue  # importing it runs the program
            count += 1
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                if info.name in OPTIONAL:
                    print(f"skip {info.name}: {exc}")
                    continue
                failed += 1
                print(f"FAIL {info.name}: {exc!r}")
            except Exception as exc:  # noqa: BLE001 - report every broken module, not just the first
                failed += 1
                print(f"FAIL {info.name}: {exc!r}")
    print(f"imported {count - failed}/{count} modules on Python {sys.version.split()[0]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
