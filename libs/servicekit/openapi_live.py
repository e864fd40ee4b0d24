"""The open (live) casts' part of the OpenAPI document (``openapi.py``): the HTTP text routes, the
cancel, and the WebSocket and WebRTC sessions, whose messages OpenAPI cannot describe, so their
descriptions name them."""

from __future__ import annotations

from .openapi_parts import CAST_ID_PARAM, UPGRADED, Json, error_body, json_body, op, ref, refused

WEBRTC_DESCRIPTION = (
    "The live session of `/v1/audio/speech/live` over a peer connection. The offer has a data channel "
    "labelled `control` and an audio transceiver to receive on (`recvonly`); the channel carries the "
    "WebSocket's JSON messages both ways (plus `{\"type\": \"cancel\"}`: the audio stops and the session "
    "ends), a close is a last `{\"type\": \"closed\", \"code\"}` message, and the track carries the "
    "cast's audio as Opus at 48 kHz, silence while waiting for text. Media uses WEBRTC_UDP_PORTS."
)


_REFUSALS = refused("LiveError", {
    "401": "invalid_write_token: no Authorization: Bearer <write_token>, or not this cast's",
    "404": "No such cast",
    "409": "A gap or an overlap (offset says where to go on), the text is closed, or not a live cast",
    "413": "The text would exceed INTAKE_MAX_CHARS",
    "415": "Unsupported Content-Type",
    "422": "A field is missing or of the wrong type",
})

WS_DESCRIPTION = (
    "A WebSocket (upgrade with GET). Client JSON messages (the LiveMessage schema): start once, then text, flush, "
    "close and cancel (barge-in: the text not yet spoken is dropped; a disconnect mid-cast cancels too unless start "
    "set keep: true). Server: binary frames of audio (one standalone MP3 chunk per sentence, or s16le mono 24 kHz "
    "PCM) and JSON events {type: cast, id, url, write_token} (the session itself writes without the token), "
    "{type: sentence, index, text}, {type: sentence_done, index, duration_ms}, {type: done, sentences, "
    "audio_ms, cancelled (when cut short)}, {type: error, error, message}. Close codes: 1000 done, 1001 server "
    "stopping, 4400 bad start, 4408 idle (INTAKE_LIVE_IDLE_S), 4429 slow reader (the reason's seq_num is where to "
    "resume listening by link), 4503 too many sessions."
)

# The write token: a bearer secret per open cast (components.securitySchemes).
WRITE_TOKEN_SCHEME: Json = {
    "type": "http", "scheme": "bearer",
    "description": "the write_token of the 201 that opened the cast (or of the WebSocket's cast event)",
}


_WRITER = {"security": [{"writeToken": []}], "parameters": [CAST_ID_PARAM]}
_SDP = {"application/sdp": {"schema": {"type": "string"}}}

LIVE_PATHS: Json = {
    "/api/casts/{id}/text": {"post": op(
        "addLiveText", "intake", "Add a fragment of an open cast's text at its offset (a resend appends nothing)",
        {"200": json_body(ref("LiveState"), "Appended, or a resend"), **_REFUSALS},
        requestBody={"required": True, "content": {"application/json": {"schema": ref("LiveText")}}}, **_WRITER,
    )},
    "/api/casts/{id}/close": {"post": op(
        "closeLiveText", "intake", "Close an open cast's text: the rest is spoken, then the cast ends (idempotent)",
        {"200": json_body(ref("LiveClosed"), "Closed"), **_REFUSALS},
        requestBody={"required": False, "content": {"application/json": {"schema": ref("LiveClose")}}}, **_WRITER,
    )},
    "/api/casts/{id}/cancel": {"post": op(
        "cancelCast", "intake", "Cancel a cast: the text not yet spoken is dropped, the cast ends with what was "
        "spoken (Authorization: Bearer with the admin token or an API key)",
        {"202": json_body(ref("Cancelled"), "The worker cuts it short at the chunk in hand"),
         "401": error_body("No admin token or API key (unauthorized)"), "404": error_body("No such cast"),
         "409": error_body("The cast has ended already (cast_ended)")},
        parameters=[CAST_ID_PARAM],
    )},
    "/v1/audio/speech/live": {"get": op(
        "liveSpeech", "intake", "Live speech over a WebSocket: text fragments in, each sentence's audio out",
        {"101": UPGRADED, "400": {"description": "Not a WebSocket upgrade"}}, description=WS_DESCRIPTION,
    )},
    "/v1/audio/speech/webrtc": {"post": op(
        "liveSpeechWebrtc", "intake", "Live speech over WebRTC: an SDP offer in, the answer out",
        {
            "201": {"description": "The SDP answer", "content": _SDP},
            "400": {"description": "Not an offer with an audio transceiver and a data channel"},
            "401": {"description": "Missing or unknown API key (when STREAMTTS_API_KEYS is set)"},
            "413": {"description": "The offer is larger than WEBRTC_MAX_OFFER_BYTES"},
            "415": {"description": "Not application/sdp"},
            "501": {"description": "intake was installed without aiortc (`streamtts[webrtc]`)"},
            "503": {"description": "Too many live sessions, or no free media port; Retry-After"},
        },
        description=WEBRTC_DESCRIPTION, requestBody={"required": True, "content": _SDP},
    )},
}  # fmt: skip
