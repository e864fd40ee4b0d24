"""The front proxy's limits as ``streamtts up`` makes them: its own settings, and what intake takes
(here intake's defaults; ``up`` reads them from the environment)."""

from __future__ import annotations

import dataclasses
from typing import Any

from intake.config import Config as IntakeConfig
from streamtts.config import Config
from streamtts.proxy import Limits

INTAKE = IntakeConfig()


def proxy_limits(settings: Config | None = None, intake: IntakeConfig = INTAKE, **changes: Any) -> Limits:
    """``up``'s limits with ``settings`` (default: Config()), what ``intake`` takes, ``changes`` over them."""
    limits = Limits(settings or Config(), intake.max_body_bytes, intake.body_timeout_s, intake.live_max_message_bytes)
    return dataclasses.replace(limits, **changes)
