"""The open (live) casts' part of the OpenAPI document (see castlog.openapi): the HTTP text routes
and the WebSocket, whose messages OpenAPI cannot describe, so its description names them."""

from __future__ import annotations

from .forms import CloseForm, LiveMessage, OpenForm, TextForm
from .openapi_parts import Json, error_body, json_body, ref
from .openapi_v1 import SPEAK_POST
from .schemas import body_schema, union_schemas

_ERROR = ref("LiveError")


WEBRTC_DESCRIPTION = (
    "The live session of `/v1/audio/speech/live` over a peer connection. The offer has a data channel "
    "labelled `control` and an audio transceiver to receive on (`recvonly`); the channel carries the "
    "WebSocket's JSON messages both ways (plus `{\"type\": \"cancel\"}`: the audio stops and the session "
    "ends), a close is a last `{\"type\": \"closed\", \"code\"}` message, and the track carries the "
    "cast's audio as Opus at 48 kHz, silence while waiting for text. Media uses WEBRTC_UDP_PORTS."
)


LIVE_SCHEMAS: Json = {
    "LiveOpenRequest": body_schema("LiveOpenRequest", OpenForm),
    "LiveText": body_schema("LiveText", TextForm),
    "LiveClose": body_schema("LiveClose", CloseForm),
    **union_schemas("LiveMessage", LiveMessage),  # the WebSocket's client messages
}

_REFUSALS: Json = {
    "401": json_body(_ERROR, "invalid_write_token: no Authorization: Bearer <write_token>, or not this cast's"),
    "404": json_body(_ERROR, "No such cast"),
    "409": json_body(_ERROR, "A gap or an overlap (offset says where to go on), the text is closed, or not a live cast"),
    "413": json_body(_ERROR, "The text would exceed INTAKE_MAX_CHARS"),
    "415": json_body(_ERROR, "Unsupported Content-Type"),
    "422": json_body(_ERROR, "A field is missing or of the wrong type"),
}

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


SPEAK_DESCRIPTION = (
    "Deepgram's TTS WebSocket protocol. Client JSON messages: {type: Speak, text}, {type: Flush}, {type: Clear}, "
    "{type: Close}. Server: {type: Metadata, request_id, model_name, model_version, model_uuid} first, binary "
    "audio (raw, no header), {type: Flushed, sequence_id} once a flushed turn's audio is all out, {type: Cleared, "
    "sequence_id}, {type: Warning, description, code}. Each flushed turn is a live cast with its own link; Clear "
    "and a disconnect cancel the turns not yet out. Authorization: Token <key> when STREAMTTS_API_KEYS is set."
)
# The write token: a bearer secret per open cast (components.securitySchemes).
WRITE_TOKEN_SCHEME: Json = {
    "type": "http", "scheme": "bearer",
    "description": "the write_token of the 201 that opened the cast (or of the WebSocket's cast event)",
}


def live_paths() -> Json:
    return {
        "/api/casts/{id}/text": {"post": {
            "operationId": "addLiveText", "tags": ["intake"], "security": [{"writeToken": []}],
            "summary": "Add a fragment of an open cast's text at its offset (a resend appends nothing)",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref("LiveText")}}},
            "responses": {"200": json_body(ref("LiveState"), "Appended, or a resend"), **_REFUSALS},
        }},
        "/api/casts/{id}/close": {"post": {
            "operationId": "closeLiveText", "tags": ["intake"], "security": [{"writeToken": []}],
            "summary": "Close an open cast's text: the rest is spoken, then the cast ends (idempotent)",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": False, "content": {"application/json": {"schema": ref("LiveClose")}}},
            "responses": {"200": json_body(ref("LiveClosed"), "Closed"), **_REFUSALS},
        }},
        "/api/casts/{id}/cancel": {"post": {
            "operationId": "cancelCast", "tags": ["intake"],
            "summary": "Cancel a cast: the text not yet spoken is dropped, the cast ends with what was spoken "
                       "(Authorization: Bearer with the admin token or an API key)",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"202": json_body(ref("Cancelled"), "The worker cuts it short at the chunk in hand"),
                          "401": error_body("No admin token or API key (unauthorized)"),
                          "404": error_body("No such cast"),
                          "409": error_body("The cast has ended already (cast_ended)")},
        }},
        "/v1/speak": {"get": {
            "operationId": "deepgramSpeak", "tags": ["intake"],
            "summary": "Deepgram-compatible TTS over a WebSocket (Pipecat's and LiveKit's Deepgram services)",
            "description": SPEAK_DESCRIPTION,
            "parameters": [
                {"name": "model", "in": "query", "required": False, "schema": {"type": "string"},
                 "description": "a voice id, or an Aura name (aura-2-thalia-en) mapped to an English voice"},
                {"name": "encoding", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": ["linear16", "mulaw", "alaw"], "default": "linear16"}},
                {"name": "sample_rate", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 8000, "maximum": 48000, "default": 24000}},
            ],
            "responses": {"101": {"description": "Switching to the WebSocket protocol"},
                          "422": {"description": "A bad model, encoding or sample_rate"}},
        }, "post": SPEAK_POST},
        "/v1/audio/speech/live": {"get": {
            "operationId": "liveSpeech", "tags": ["intake"],
            "summary": "Live speech over a WebSocket: text fragments in, each sentence's audio out",
            "description": WS_DESCRIPTION,
            "responses": {"101": {"description": "Switching to the WebSocket protocol"},
                          "400": {"description": "Not a WebSocket upgrade"}},
        }},
        "/v1/audio/speech/webrtc": {"post": {
            "operationId": "liveSpeechWebrtc", "tags": ["intake"],
            "summary": "Live speech over WebRTC: an SDP offer in, the answer out",
            "description": WEBRTC_DESCRIPTION,
            "requestBody": {"required": True, "content": {"application/sdp": {"schema": {"type": "string"}}}},
            "responses": {
                "201": {"description": "The SDP answer", "content": {"application/sdp": {"schema": {"type": "string"}}}},
                "400": {"description": "Not an offer with an audio transceiver and a data channel"},
                "401": {"description": "Missing or unknown API key (when STREAMTTS_API_KEYS is set)"},
                "413": {"description": "The offer is larger than WEBRTC_MAX_OFFER_BYTES"},
                "415": {"description": "Not application/sdp"},
                "501": {"description": "intake was installed without aiortc (`streamtts[webrtc]`)"},
                "503": {"description": "Too many live sessions, or no free media port; Retry-After"},
            },
        }},
    }  # fmt: skip
