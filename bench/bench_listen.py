"""Listening check: how well each voice reads the repository's texts, heard through Whisper.

Each text is read as the worker reads it (a chunk at a time, through the MP3 encoder, the
chunks back to back), transcribed by Whisper tiny.en (the ``listen`` extra, no download) and
scored by word error rate against the text, both normalised. Also, per voice: the longest
silence inside a chunk and the pauses at the seams between chunks (ms of audio).

    python bench/bench_listen.py [--voices af_heart,am_michael,…] [--texts short,paragraph] [--quick]

The English voices come from ``streamtts voices install`` (KOKORO_MODEL_DIR, else the tests'
cache, which is filled from npm when empty).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from streamtts import listening
from synth.model import load_synthesizer

from common import RESULTS, repo_texts

VOICES = ("af_heart", "am_michael", "bf_emma", "bm_george", "jf_alpha", "jm_kumo")
QUICK_VOICES = ("af_heart", "jf_alpha")
QUICK_TEXTS = ("short", "paragraph")


def measure(synth: object, voice: str, texts: dict[str, str]) -> dict[str, object]:
    errors = reference_words = 0
    per_text: dict[str, float] = {}
    inner: list[int] = []
    seams: list[int] = []
    for name, text in texts.items():
        cast = listening.read_as_cast(synth, text, voice)
        rate = listening.wer(text, listening.transcribe(cast.pcm))
        per_text[name] = rate
        n = len(listening.words(text))
        errors += round(rate * n)
        reference_words += n
        inner += [listening.longest_inner_silence_ms(c) for c in cast.chunks]
        seams += listening.seam_pauses_ms(cast.chunks)
    return {
        "voice": voice, "wer": errors / max(1, reference_words), "per_text": per_text,
        "longest_inner_silence_ms": max(inner, default=0),
        "seam_pause_median_ms": statistics.median(seams) if seams else 0, "seam_pause_max_ms": max(seams, default=0),
    }


def table(rows: list[dict[str, object]], names: list[str]) -> str:
    head = ["voice", "WER", *names, "longest inner silence", "seam pause median / max"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        per = r["per_text"]
        assert isinstance(per, dict)
        lines.append(" | ".join([
            str(r["voice"]), f"{r['wer']:.1%}", *(f"{per[n]:.1%}" for n in names),
            f"{r['longest_inner_silence_ms']} ms", f"{r['seam_pause_median_ms']:.0f} / {r['seam_pause_max_ms']} ms",
        ]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--voices", default=",".join(VOICES))
    parser.add_argument("--texts", default="", help="comma-separated names from texts/ (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"{','.join(QUICK_VOICES)} on {','.join(QUICK_TEXTS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "listen.json")
    args = parser.parse_args()
    voices = list(QUICK_VOICES) if args.quick else [v for v in args.voices.split(",") if v]
    wanted = list(QUICK_TEXTS) if args.quick else [t for t in args.texts.split(",") if t]
    texts = repo_texts()
    texts = {name: texts[name] for name in (wanted or texts)}
    model_dir = os.environ.get("KOKORO_MODEL_DIR") or str(listening.english_model_dir())
    synth = load_synthesizer("onnx", model_dir=model_dir, threads=args.threads)
    rows = []
    for voice in voices:
        rows.append(measure(synth, voice, texts))
        print(f"{voice}: WER {rows[-1]['wer']:.1%}", file=sys.stderr, flush=True)
    print(table(rows, list(texts)))
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
