"""Print the pip constraints of a synth build: first what the base image already ships (its CUDA
torch, its numpy), pinned, then the repository's constraints.txt (the files given as arguments)
for everything else, without the packages the base image pinned.

NVIDIA's torch builds for Jetson and CUDA are not on PyPI; without these pins, installing the
`torch` extra could swap them for a CPU-only wheel, and constraints.txt's numpy (the version the
tests ran) could fight the one the base's torch was built against. On a base without torch or
numpy this prints constraints.txt alone.
"""

import re
import sys
from importlib import metadata

KEEP = ("torch", "torchaudio", "torchvision", "numpy")
NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")

pinned = set()
for name in KEEP:
    try:
        print(f"{name}=={metadata.version(name)}")
        pinned.add(name)
    except metadata.PackageNotFoundError:
        pass

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as constraints:
        for line in constraints:
            line = line.strip()
            match = NAME.match(line)
            if match and re.sub(r"[-_.]+", "-", match.group(1)).lower() not in pinned:
                print(line)
