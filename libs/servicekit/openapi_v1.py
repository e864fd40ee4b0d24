"""The OpenAI-compatible routes (`/v1/*`, answered by intake) in the OpenAPI document, and
Deepgram's TTS on ``/v1/speak``: REST (POST; its error shape is ``answers.DeepgramError``) and the
WebSocket (GET)."""

from __future__ import annotations

from .openapi_parts import UPGRADED, Json, json_body, op, ref, refused

# What OpenAI's speech route and Deepgram's REST one refuse alike (each in its own shape).
_SPEECH_REFUSALS = {
    "400": "the body is not JSON",
    "415": "the body is not application/json",
    "429": "rate limited, or too many open speech streams",
    "500": "the synthesis failed before any audio: send the request again",
}


def _header(description: str) -> Json:
    return {"schema": {"type": "string"}, "description": description}


def _query(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_AUDIO = {f"audio/{t}": {"schema": {"type": "string", "format": "binary"}}
          for t in ("mpeg", "ogg", "aac", "flac", "wav", "pcm")}
_SPEECH_HEADERS = {"X-Cast-Id": _header("the cast behind the audio"), "Location": _header("the cast's player, /c/<id>")}


def _get(operation_id: str, summary: str, schema: Json) -> Json:
    return {"get": op(operation_id, "openai", summary, {
        "200": json_body(schema, summary), **refused("OpenAIError", {"401": "a key is wanted"})})}


_DEEPGRAM_AUDIO = {t: {"schema": {"type": "string", "format": "binary"}} for t in (
    "audio/mpeg", "audio/ogg", "audio/flac", "audio/aac", "audio/wav", "audio/l16", "audio/basic",
    "audio/x-alaw-basic")}
_MODEL = _query("model", {"type": "string"}, "a voice id, or an Aura name (aura-2-thalia-en) mapped to an English voice")
_SPEAK_DESCRIPTION = (
    "Deepgram's TTS WebSocket protocol. Client JSON messages: {type: Speak, text}, {type: Flush}, {type: Clear}, "
    "{type: Close}. Server: {type: Metadata, request_id, model_name, model_version, model_uuid} first, binary "
    "audio (raw, no header), {type: Flushed, sequence_id} once a flushed turn's audio is all out, {type: Cleared, "
    "sequence_id}, {type: Warning, description, code}. Each flushed turn is a live cast with its own link; Clear "
    "and a disconnect cancel the turns not yet out. Authorization: Token <key> when STREAMTTS_API_KEYS is set."
)

V1_PATHS: Json = {
    "/v1/audio/speech": {"post": op(
        "createSpeech", "openai", "OpenAI's speech endpoint: the audio streams as the cast is made (a repeat replays it)",
        {
            "200": {"description": "the audio (or, with stream_format=sse, speech.audio.delta and "
                    "speech.audio.done events)", "headers": _SPEECH_HEADERS,
                    "content": {**_AUDIO, "text/event-stream": {"schema": {"type": "string"}}}},
            **refused("OpenAIError", {
                **_SPEECH_REFUSALS,
                "401": "STREAMTTS_API_KEYS is set and no key of it was sent as a bearer token",
                "422": "a field is unknown, missing or invalid: param names it",
                "503": "Redis is unreachable or intake is overloaded",
            }),
        },
        requestBody={"required": True, "content": {"application/json": {"schema": ref("SpeechRequest")}}},
    )},
    "/v1/audio/voices": _get("listSpeechVoices", "Voices as Open WebUI reads them", ref("V1Voices")),
    "/v1/audio/models": _get("listSpeechModels", "Models as Open WebUI reads them", ref("AudioModels")),
    "/v1/models": _get("listModels", "The model's names, as OpenAI lists models", ref("ModelList")),
    "/v1/models/{model}": {"get": op(
        "getModel", "openai", "One model name",
        {"200": json_body(ref("Model"), "the model"), **refused("OpenAIError", {"404": "no such model"})},
        parameters=[{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
    )},
    "/v1/speak": {"get": op(
        "deepgramSpeak", "intake", "Deepgram-compatible TTS over a WebSocket (Pipecat's and LiveKit's Deepgram services)",
        {"101": UPGRADED, "422": {"description": "A bad model, encoding or sample_rate"}},
        description=_SPEAK_DESCRIPTION,
        parameters=[
            _MODEL,
            _query("encoding", {"type": "string", "enum": ["linear16", "mulaw", "alaw"], "default": "linear16"},
                   "the audio's encoding"),
            _query("sample_rate", {"type": "integer", "minimum": 8000, "maximum": 48000, "default": 24000},
                   "the audio's samples per second"),
        ],
    ), "post": op(
        "deepgramSpeakRest", "intake", "Deepgram's REST TTS: the whole text in, the audio streamed as it is made "
        "(Pipecat's DeepgramHttpTTSService, LiveKit's deepgram.TTS.synthesize())",
        {
            "200": {"description": "the audio, chunked as it is made", "content": _DEEPGRAM_AUDIO, "headers": {
                "dg-request-id": _header("this request's id"),
                "dg-model-name": _header("the model asked for (or the voice)"),
                "dg-model-uuid": _header("the voice that reads"),
                "dg-char-count": _header("characters of the text"),
                **_SPEECH_HEADERS,
            }},
            **refused("DeepgramError", {
                **_SPEECH_REFUSALS,
                "401": "STREAMTTS_API_KEYS is set and no key of it was sent (INVALID_AUTH)",
                "422": "a bad query parameter (INVALID_QUERY_PARAMETER), an unknown model, or no text",
                "503": "Redis is unreachable, intake is overloaded or no worker has started yet",
            }),
        },
        description="The text is a cast like POST /v1/audio/speech's (the same text and voice is the same cast); a "
        "client that hangs up mid-stream cancels the cast it made. Authorization: Token <key> (or Bearer) when "
        "STREAMTTS_API_KEYS is set.",
        parameters=[
            _MODEL,
            _query("encoding", {"type": "string", "default": "mp3",
                                "enum": ["linear16", "mulaw", "alaw", "mp3", "opus", "flac", "aac"]}, "the audio's encoding"),
            _query("container", {"type": "string", "enum": ["wav", "none", "ogg"]},
                   "linear16, mulaw, alaw: wav (default) or none; opus: ogg; others: none"),
            _query("sample_rate", {"type": "integer", "minimum": 8000, "maximum": 48000},
                   "linear16 (default 24000), mulaw and alaw (default 8000): 8000-48000; the others come at 24000"),
            _query("bit_rate", {"type": "integer"}, "mp3 32000-320000, opus 4000-650000, aac 4000-192000"),
            _query("speed", {"type": "number", "minimum": 0.5, "maximum": 2.0, "default": 1.0}, "the speaking rate"),
        ],
        requestBody={"required": True, "content": {"application/json": {"schema": ref("DeepgramSpeakRequest")}}},
    )},
}  # fmt: skip
