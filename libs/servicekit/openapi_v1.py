"""The OpenAI-compatible routes (`/v1/*`, answered by intake) in the OpenAPI document, and
Deepgram's REST TTS, ``POST /v1/speak`` (the WebSocket upgrade on the same path is
``openapi_live``'s; Deepgram's error shape is ``answers.DeepgramError``)."""

from __future__ import annotations

from .forms import SpeakBody, SpeechRequest
from .openapi_parts import Json, json_body, ref
from .schemas import body_schema


def _error(description: str) -> Json:
    return json_body(ref("OpenAIError"), description)


V1_SCHEMAS: Json = {
    "SpeechRequest": body_schema("SpeechRequest", SpeechRequest),
    "DeepgramSpeakRequest": body_schema("DeepgramSpeakRequest", SpeakBody),
}

_AUDIO = {f"audio/{t}": {"schema": {"type": "string", "format": "binary"}}
          for t in ("mpeg", "ogg", "aac", "flac", "wav", "pcm")}
_SPEECH_HEADERS = {
    "X-Cast-Id": {"schema": {"type": "string"}, "description": "the cast behind the audio"},
    "Location": {"schema": {"type": "string"}, "description": "the cast's player, /c/<id>"},
}


def _get(operation_id: str, summary: str, schema: Json) -> Json:
    return {"get": {"operationId": operation_id, "tags": ["openai"], "summary": summary,
                    "responses": {"200": json_body(schema, summary), "401": _error("a key is wanted")}}}


V1_PATHS: Json = {
    "/v1/audio/speech": {"post": {
        "operationId": "createSpeech", "tags": ["openai"],
        "summary": "OpenAI's speech endpoint: the audio streams as the cast is made (a repeat replays it)",
        "requestBody": {"required": True, "content": {"application/json": {"schema": ref("SpeechRequest")}}},
        "responses": {
            "200": {"description": "the audio (or, with stream_format=sse, speech.audio.delta and "
                    "speech.audio.done events)", "headers": _SPEECH_HEADERS,
                    "content": {**_AUDIO, "text/event-stream": {"schema": {"type": "string"}}}},
            "400": _error("the body is not JSON"),
            "401": _error("STREAMTTS_API_KEYS is set and no key of it was sent as a bearer token"),
            "415": _error("the body is not application/json"),
            "422": _error("a field is unknown, missing or invalid: param names it"),
            "429": _error("rate limited, or too many open speech streams"),
            "500": _error("the synthesis failed before any audio: send the request again"),
            "503": _error("Redis is unreachable or intake is overloaded"),
        },
    }},
    "/v1/audio/voices": _get("listSpeechVoices", "Voices as Open WebUI reads them", ref("V1Voices")),
    "/v1/audio/models": _get("listSpeechModels", "Models as Open WebUI reads them", ref("AudioModels")),
    "/v1/models": _get("listModels", "The model's names, as OpenAI lists models", ref("ModelList")),
    "/v1/models/{model}": {"get": {
        "operationId": "getModel", "tags": ["openai"], "summary": "One model name",
        "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": json_body(ref("Model"), "the model"), "404": _error("no such model")},
    }},
}  # fmt: skip


# Deepgram's REST TTS (POST /v1/speak).
def _query(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _deepgram_error(description: str) -> Json:
    return json_body(ref("DeepgramError"), description)


def _header(description: str) -> Json:
    return {"schema": {"type": "string"}, "description": description}


_DEEPGRAM_AUDIO = {t: {"schema": {"type": "string", "format": "binary"}} for t in (
    "audio/mpeg", "audio/ogg", "audio/flac", "audio/aac", "audio/wav", "audio/l16", "audio/basic",
    "audio/x-alaw-basic")}

SPEAK_POST: Json = {
    "operationId": "deepgramSpeakRest", "tags": ["intake"],
    "summary": "Deepgram's REST TTS: the whole text in, the audio streamed as it is made (Pipecat's "
               "DeepgramHttpTTSService, LiveKit's deepgram.TTS.synthesize())",
    "description": "The text is a cast like POST /v1/audio/speech's (the same text and voice is the same "
                   "cast); a client that hangs up mid-stream cancels the cast it made. Authorization: "
                   "Token <key> (or Bearer) when STREAMTTS_API_KEYS is set.",
    "parameters": [
        _query("model", {"type": "string"}, "a voice id, or an Aura name (aura-2-thalia-en) mapped to an English voice"),
        _query("encoding", {"type": "string", "default": "mp3",
                            "enum": ["linear16", "mulaw", "alaw", "mp3", "opus", "flac", "aac"]}, "the audio's encoding"),
        _query("container", {"type": "string", "enum": ["wav", "none", "ogg"]},
               "linear16, mulaw, alaw: wav (default) or none; opus: ogg; others: none"),
        _query("sample_rate", {"type": "integer", "minimum": 8000, "maximum": 48000},
               "linear16 (default 24000), mulaw and alaw (default 8000): 8000-48000; the others come at 24000"),
        _query("bit_rate", {"type": "integer"}, "mp3 32000-320000, opus 4000-650000, aac 4000-192000"),
        _query("speed", {"type": "number", "minimum": 0.5, "maximum": 2.0, "default": 1.0}, "the speaking rate"),
    ],
    "requestBody": {"required": True, "content": {"application/json": {"schema": ref("DeepgramSpeakRequest")}}},
    "responses": {
        "200": {"description": "the audio, chunked as it is made", "content": _DEEPGRAM_AUDIO, "headers": {
            "dg-request-id": _header("this request's id"),
            "dg-model-name": _header("the model asked for (or the voice)"),
            "dg-model-uuid": _header("the voice that reads"),
            "dg-char-count": _header("characters of the text"),
            **_SPEECH_HEADERS,
        }},
        "400": _deepgram_error("the body is not JSON"),
        "401": _deepgram_error("STREAMTTS_API_KEYS is set and no key of it was sent (INVALID_AUTH)"),
        "415": _deepgram_error("the body is not application/json"),
        "422": _deepgram_error("a bad query parameter (INVALID_QUERY_PARAMETER), an unknown model, or no text"),
        "429": _deepgram_error("rate limited, or too many open speech streams"),
        "500": _deepgram_error("the synthesis failed before any audio: send the request again"),
        "503": _deepgram_error("Redis is unreachable, intake is overloaded or no worker has started yet"),
    },
}  # fmt: skip
