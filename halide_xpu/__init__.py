"""halide-xpu: Halide pipelines with explicit GPU/CPU schedules as an Inductor backend for xpu (and cpu/cuda)."""
from __future__ import annotations

__version__ = "0.1.0"

from . import config, stats  # noqa: E402


def _autoload() -> None:
    """``torch.backends`` entry point: run by ``import torch``; only installs a lazy hook (no heavy imports)."""
    from . import registration

    registration.install()


_autoload()

__all__ = ["config", "stats", "__version__"]
