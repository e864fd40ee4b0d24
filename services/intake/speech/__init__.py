"""intake's speech room: everything that streams and converts audio.

``POST /v1/audio/speech`` and OpenAI's lists (``views.py``, ``v1.py``), the response that follows
a cast's log and converts its MP3 as it comes (``stream.py``, ``formats.py``), and the live
WebSocket (``livews.py``), the same session over WebRTC (``webrtc.py``, with
``rtctrack.py`` and ``rtcports.py``), the Deepgram-compatible ``/v1/speak`` WebSocket
(``speak.py``) and Deepgram's REST TTS on the same path (``speakhttp.py``). Its requests claim casts through the claim side's
public pieces (``claim``, ``live``, ``validate``, ``context``); the claim side never imports this
room, and only ``app.py`` wires it in, with ``add_routes``.
"""

from __future__ import annotations

import importlib.util
import logging

from aiohttp import web

from ..context import CONFIG
from ..validate import Refusal
from . import livews, speak, speakhttp, views
from .v1 import error_response

V1_PREFIX = "/v1/"
WEBRTC_ROUTE = "/v1/audio/speech/webrtc"
log = logging.getLogger(__name__)

__all__ = ["V1_PREFIX", "add_routes", "refusal_response"]


def add_routes(app: web.Application) -> None:
    """The room's routes, and its shutdown: speech streams end, live sessions close their text."""
    app.on_shutdown.append(views.close_streams)
    app.on_shutdown.append(livews.close_sessions)
    app.router.add_get(livews.ROUTE, livews.live_socket)
    app.router.add_post(WEBRTC_ROUTE, post_webrtc)
    app.router.add_get(speak.ROUTE, speak.speak_socket)
    app.router.add_post(speak.ROUTE, speakhttp.post_speak)
    app.router.add_post("/v1/audio/speech", views.post_speech)
    app.router.add_get("/v1/audio/voices", views.get_v1_voices)
    app.router.add_get("/v1/audio/models", views.get_v1_audio_models)
    app.router.add_get("/v1/models", views.get_v1_models)
    app.router.add_get("/v1/models/{model}", views.get_v1_model)
    if app[CONFIG].wyoming_port and importlib.util.find_spec("wyoming") is None:  # intake's extra: no server
        log.error("INTAKE_WYOMING_PORT is set but the `wyoming` package is missing: pip install 'streamtts[intake]'")
    elif app[CONFIG].wyoming_port:
        from .wyomingserver import wyoming_ctx  # the `wyoming` package: only where the server runs

        app.cleanup_ctx.append(wyoming_ctx)


def refusal_response(request: web.Request, refusal: Refusal) -> web.Response | None:
    """A refusal in the room's shapes: Deepgram's on its REST route, OpenAI's on the rest of
    ``/v1/*`` (but the live WebSocket's refusals keep intake's own); None (intake's own) elsewhere."""
    if speakhttp.refused_here(request):
        return speakhttp.error_response(refusal)
    openai = request.path.startswith(V1_PREFIX) and request.path != livews.ROUTE
    return error_response(refusal) if openai else None


async def post_webrtc(request: web.Request) -> web.StreamResponse:
    """``webrtc.py`` needs aiortc, an extra (``streamtts[webrtc]``, in intake's image): imported on
    first use, so that intake without it serves everything else."""
    if importlib.util.find_spec("aiortc") is None:
        raise Refusal(501, "webrtc_unavailable", "WebRTC needs aiortc in intake: pip install 'streamtts[webrtc]'")
    from . import webrtc

    return await webrtc.post_webrtc(request)
