"""servicekit: the common shape of StreamTTS's services, everything HTTP and operations.

Settings from the environment, the Redis connection, the request bodies the services decode, the
JSON bodies they answer and the public OpenAPI document generated from both, the client's address
behind a proxy, JSON errors, SSE frames, health and readiness, the metrics registry, logging and
the ``__main__`` runner with its graceful stop. ``castlog`` holds what touches a Redis key; this
library imports it (and aiohttp, prometheus_client, msgspec); no service, ``fanout`` or
``durablestreams``, which sit on it.
"""

from .address import UNIX_PEER, address_in, client_address, request_client
from .connect import client_for, connect, healthy, redact
from .crosssite import cross_site_guard
from .errors import Refusal, encode_json, json_errors, json_response
from .headers import add_security_headers
from .health import Problem, probe, redis_answers
from .holds import ClientHolds, Hold
from .metrics import RequestCounter, ServiceMetrics
from .openapi import EdgeLimits, IntakeLimits, serve_openapi
from .openapi import document as openapi_document
from .runner import Serving, run, setup_logging
from .settings import ConfigError, Settings, setting

__all__ = [
    "UNIX_PEER", "ClientHolds", "ConfigError", "EdgeLimits", "Hold", "IntakeLimits", "Problem", "Refusal", "RequestCounter", "ServiceMetrics", "Serving",
    "Settings",
    "add_security_headers", "address_in", "client_address", "client_for", "connect", "cross_site_guard", "encode_json", "healthy",
    "json_errors", "json_response", "openapi_document", "probe", "redact", "redis_answers", "request_client", "run",
    "serve_openapi", "setting",
    "setup_logging",
]
