"""Print pip constraints that pin what the base image already ships (its CUDA torch, its numpy).

NVIDIA's torch builds for Jetson and CUDA are not on PyPI; without these pins, installing the
`torch` extra could swap them for a CPU-only wheel. On a base without torch this prints nothing.
"""

from importlib import metadata

KEEP = ("torch", "torchaudio", "torchvision", "numpy")

for name in KEEP:
    try:
        print(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pass
