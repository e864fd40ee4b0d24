"""The OpenAI-compatible routes (`/v1/*`, answered by intake) in the OpenAPI document."""

from __future__ import annotations

from .forms import SpeechRequest
from .openapi_parts import Json, json_body, ref
from .schemas import body_schema


def _error(description: str) -> Json:
    return json_body(ref("OpenAIError"), description)


V1_SCHEMAS: Json = {"SpeechRequest": body_schema("SpeechRequest", SpeechRequest)}

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
