"""intake: turns a request into a claimed cast and one job, or a clear refusal, and nothing else."""

from .app import create_app, serving
from .config import Config

__all__ = ["Config", "create_app", "serving"]
