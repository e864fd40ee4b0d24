"""One active cast in this worker: its chunks, where the next chunk goes, its tail and timeline."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import castlog
import chunking
from castlog import SAMPLE_RATE, Audio, CastState, Entry, Stamped, Start
from chunking import Chunker
from chunking.cuts import cut_head

from .model.timing import Word
from .mp3 import ENCODER_DELAY_SAMPLES
from .scheduler import RAMP_MIN_CHARS, Cut, Pace
from .seams import lookahead, lookbehind


@dataclass
class OpenText:
    """An open cast's text as this worker has read it from the catalog so far, and its chunks:
    the one splitter (chunking), fed fragment by fragment, gives exactly the batch splitter's
    chunks however the text is cut into fragments; a flush (the client's ``flush``, or the
    close) ends the pending sentence as a line break would. The ramp may cut a chunk further in
    place (ActiveCast.take_chunk): ``chunks`` and ``continued`` are this cast's, the chunker's
    count is only the splitter's."""

    chunker: Chunker = field(default_factory=Chunker)
    chunks: list[str] = field(default_factory=list)  # every chunk cut so far
    # Per chunk: whether it goes on with the sentence of the chunk before (see Chunker).
    continued: list[bool] = field(default_factory=list)
    after: str = "0-0"  # the last catalog entry read
    end: int = 0  # the text's end offset (characters as sent)
    parts: list[str] = field(default_factory=list)  # the fragments kept (joined once, at a close)
    closed: bool = False
    heard_at: float = 0.0  # clock time when text last came (for SYNTH_LIVE_IDLE_S)
    speed: float = 1.0
    client: str = ""  # the opener's tag from the recipe (castlog.client_tag); '' in older casts

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def add(self, new: list[str]) -> int:
        """The chunks the chunker just completed, kept with their ``continued``; how many."""
        self.chunks.extend(new)
        self.continued.extend(self.chunker.continued[len(self.chunker.continued) - len(new) :])
        return len(new)


@functools.lru_cache(maxsize=1024)
def heads(chunk: str) -> tuple[str, ...]:
    """Every head the ramp may cut ``chunk`` to (cut_head at any limit), the chunk itself first,
    then longest first: where an earlier cast's ramp cut the same sentence, the cache has it."""
    cut = {cut_head(chunk, limit)[0] for limit in range(RAMP_MIN_CHARS, len(chunk))}
    return (chunk, *sorted(cut - {chunk}, key=len, reverse=True))


def _rest(chunk: str, head: str) -> str:
    """What is left of ``chunk`` after ``head`` (its first words)."""
    return " ".join(chunk.split()[len(head.split()) :])


def job_key(stream: str, entry_id: str) -> str:
    return entry_id if stream == castlog.JOBS else f"{stream}:{entry_id}"


@dataclass(frozen=True)
class Assignment:
    """One job (a ``castlog.streams.Job`` entry of ``jobs`` or ``jobs/live``) as the group delivered it
    to this worker: where it stands in its stream and how often it was delivered."""

    entry_id: str
    cast_id: str
    enqueued_at: int  # ms since the epoch (Redis's clock), 0 when the entry had none
    deliveries: int  # the group's delivery count: this job's attempt number
    stream: str = castlog.JOBS  # `jobs`, or `jobs/live` for an open cast

    @property
    def key(self) -> str:
        """Unique among the jobs of both streams (entry ids are unique only within one)."""
        return job_key(self.stream, self.entry_id)

    @property
    def live(self) -> bool:
        return self.stream == castlog.JOBS_LIVE


@dataclass
class ActiveCast:
    """A cast this worker is synthesizing: one attempt, from ``resume_from`` to the last chunk.

    Chunks are synthesized in order (``next_synth``) and appended in order (``next_append``);
    between the two, at most a chunk or two sit in the encoder. ``tail`` is the seq_num the next
    conditional append expects; ``offset_ms`` is where the next audio starts on the timeline.
    ``pace`` is the cast's one lead, a value replaced at each event (Pace); the schedule reads the cast
    through the read-only :class:`~synth.livesched.Interactive` and changes nothing.
    """

    job: Assignment
    voice: str
    chunks: list[str]
    attempt: int  # the number in this attempt's `start` record
    job_attempt: int  # attempts of this job (counts against SYNTH_MAX_ATTEMPTS)
    resume_from: int
    tail: int
    offset_ms: int  # sum of the playable durations before sentence `next_append`
    first_audio_ts: int | None  # the stamp (ts) of the cast's first audio record in any attempt
    continued: list[bool] = field(default_factory=list)  # per chunk: it goes on with a sentence
    pace: Pace = field(default_factory=Pace)
    speed: float = 1.0  # the model's speed, from the cast's `meta`
    next_synth: int = 0
    next_append: int = 0
    synth_s: float = 0.0  # inference time this attempt spent
    failing: bool = False  # a chunk failed: no more chunks; the failure is on its way
    open_text: OpenText | None = None  # an open cast's growing text; None for a whole text
    closed: bool = False  # finished, failed or lost: chunks still in flight are dropped
    cancelled: bool = False  # cut short: the chunks not yet appended were dropped (eos says so)
    appending: bool = False  # a chunk's conditional append is on its way to Redis

    def __post_init__(self) -> None:
        self.next_synth = self.next_append = self.resume_from

    @property
    def cast_id(self) -> str:
        return self.job.cast_id

    @property
    def wants_chunk(self) -> bool:
        return not (self.closed or self.failing) and self.next_synth < len(self.chunks)

    @property
    def chunks_left(self) -> int:
        return len(self.chunks) - self.next_synth

    @property
    def complete(self) -> bool:
        return self.next_append >= len(self.chunks) and (self.open_text is None or self.open_text.closed)

    @property
    def live(self) -> bool:
        return self.open_text is not None

    @property
    def speaking(self) -> bool:
        """A live cast with something to say: a chunk to make or to append. One waiting for text
        (or holding half a sentence) says nothing, and holds none of SYNTH_MAX_LIVE."""
        return self.live and not self.closed and self.next_append < len(self.chunks)

    @property
    def reading_speed(self) -> float:
        """The speed its chunks are read at: an open cast's from its recipe, else its `meta`'s."""
        return self.open_text.speed if self.open_text is not None else self.speed

    @property
    def client(self) -> str:
        """Which client this cast's chunks count for, round robin among open casts: its opener's tag; a cast opened
        without one (before tags, or a whole text) counts as a client of its own."""
        tag = self.open_text.client if self.open_text is not None else ""
        return tag or f"cast:{self.cast_id}"

    @property
    def typing(self) -> bool:
        """An open cast holds text that completes no sentence yet."""
        text = self.open_text
        return text is not None and not text.closed and bool(text.chunker.pending.strip())

    @property
    def in_flight(self) -> int:
        """Chunks synthesized (or being synthesized) and not yet appended."""
        return self.next_synth - self.next_append

    def trims_lead(self, i: int) -> bool:
        """Whether chunk ``i``'s leading silence goes: the cast's first words come at once, and a
        chunk that continues a sentence follows the one before without a sentence's pause."""
        return i == 0 or (i < len(self.continued) and self.continued[i])

    def context(self, i: int) -> tuple[str, str]:
        """The words the model reads before and after chunk ``i``, where the sentence goes on
        across a seam (see seams): the chunk's audio is cut to its own words."""
        goes_on = i + 1 < len(self.chunks) and i + 1 < len(self.continued) and self.continued[i + 1]
        went_on = 0 < i < len(self.continued) and self.continued[i]
        return (lookbehind(self.chunks[i - 1]) if went_on else "", lookahead(self.chunks[i + 1]) if goes_on else "")

    def cancel(self) -> None:
        """Drop every chunk not yet appended (and an open cast's text to come): the listener
        hears nothing more than what is in the log, or on its way there now (``appending``).
        The chunk in hand finishes on the model thread and is thrown away; the cast is complete
        once the append on its way, if any, is in."""
        self.cancelled = True
        keep = self.next_append + (1 if self.appending else 0)
        del self.chunks[keep:]
        del self.continued[keep:]
        self.next_synth = min(self.next_synth, keep)
        if self.open_text is not None:
            self.open_text.closed = True

    def take_chunk(self, head: str | None = None) -> tuple[int, str]:
        """The next chunk to synthesize, with its index: cut to ``head`` (one of :func:`heads`:
        the cache's, or the ramp's, see :meth:`cuts`), else as the splitter made it; its rest is
        the next chunk, going on with the sentence."""
        i = self.next_synth
        self.next_synth += 1
        if head is not None and (rest := _rest(self.chunks[i], head)):
            self.chunks[i : i + 1] = [head, rest]
            self.continued.insert(i + 1, True)
        return i, self.chunks[i]

    def whole_cut(self, read: Callable[[str, str, str], str]) -> Cut:
        """The next chunk as a :class:`Cut`: its length and the words it is read with
        (``read(text, ahead, behind)``: seams.read_text)."""
        chunk = self.chunks[self.next_synth]
        behind, ahead = self.context(self.next_synth)
        return Cut(len(chunk), len(read(chunk, ahead, "")) - len(chunk), len(read(chunk, "", behind)) - len(chunk))

    def heads(self) -> tuple[str, ...]:
        """The heads the next chunk may be cut to now (:func:`heads`, without the chunk itself)."""
        return heads(self.chunks[self.next_synth])[1:]

    def cuts(self, read: Callable[[str, str, str], str]) -> list[Cut]:
        """Where each of :meth:`heads` cuts the next chunk and the words each side reads across
        the cut (``read`` as in :meth:`whole_cut`), in their order, then the chunk's other word
        boundaries, where a later piece may be cut (``Cut.later``): the ramp's choices
        (scheduler.ramp_cut)."""
        chunk, options = self.chunks[self.next_synth], self.heads()
        words = chunk.split()
        at = {len(head.split()) for head in options}
        later = [" ".join(words[:n]) for n in range(1, len(words)) if n not in at]
        cuts: list[Cut] = []
        for head in [*options, *later]:
            rest = _rest(chunk, head)
            cuts.append(Cut(len(head), len(read(head, lookahead(rest), "")) - len(head),
                            len(read(rest, "", lookbehind(head))) - len(rest), later=len(cuts) >= len(options)))
        return cuts

    def context_if(self, head: str) -> tuple[str, str]:
        """The context (as :meth:`context`) the next chunk would be read with, cut to ``head``."""
        behind, ahead = self.context(self.next_synth)
        rest = _rest(self.chunks[self.next_synth], head)
        return behind, lookahead(rest) if rest else ahead

    def audio_record(
        self, i: int, duration_ms: int, body: bytes, words: Sequence[Word] = (), *, cached: bool = False
    ) -> Audio:
        if i != self.next_append:
            raise AssertionError(f"cast {self.cast_id}: chunk {i} appended out of order ({self.next_append})")
        planned = len(self.chunks) if self.live else 0
        return Audio(i=i, t=self.chunks[i], d=duration_ms, o=self.offset_ms, n=planned,
                     w=chunk_words(words, duration_ms), c=cached, body=body)

    def appended(self, audio: Audio, stamped: Stamped, now: float) -> None:
        if self.first_audio_ts is None:
            self.first_audio_ts = stamped.ts
        self.tail = stamped.tail
        self.offset_ms += audio.d
        self.next_append += 1
        self.pace = self.pace.appended(audio.d, now)


def chunk_words(words: Sequence[Word], duration_ms: int) -> tuple[Word, ...]:
    """The model's word times moved to where a decoder puts them in the MP3 chunk (after the
    encoder's delay), within the chunk (its trailing silence may have been trimmed)."""
    shift = round(ENCODER_DELAY_SAMPLES * 1000 / SAMPLE_RATE)
    return tuple((w, min(a + shift, duration_ms), min(b + shift, duration_ms)) for w, a, b in words)


def first_audio_ts(entries: Sequence[Entry]) -> int | None:
    return next((e.ts for e in entries if isinstance(e.record, Audio)), None)


def plan(
    job: Assignment,
    voice: str,
    text: str,
    entries: Sequence[Entry],
    state: CastState,
    tail: int,
    open_text: OpenText | None = None,
    failures: int = 0,
) -> ActiveCast:
    """The cast's next attempt, to be opened by a `start` at ``tail`` (the log's true tail, which
    counts records of kinds this version skips): resume at the first sentence not in the log.
    An open cast's chunks so far come from ``open_text``. The chunks the log has stand as they
    were made (an earlier attempt's ramp may have cut them finer than the splitter)."""
    resume_from = state.next_sentence()
    kept = [e.record for e in castlog.playable(entries) if isinstance(e.record, Audio) and e.record.i < resume_from]
    offset = sum(a.d for a in kept)  # the playable audio before the first chunk to make
    made = [a.t for a in kept]
    if open_text is not None:  # the lists grow with the open cast's text: rebuilt in place
        chunks, continued = open_text.chunks, open_text.continued
        chunks[:], continued[:] = resumed_chunks(list(chunks), list(continued), made)
    else:
        chunker = chunking.Chunker()
        chunks, continued = resumed_chunks(chunker.feed(text, final=True), chunker.continued, made)
    return ActiveCast(
        job=job,
        voice=voice,
        chunks=chunks,
        continued=continued,
        # The `start` number continues the log's. The job's attempt (against SYNTH_MAX_ATTEMPTS)
        # counts only the attempts that failed in the model or encoder (its tally), not the
        # deliveries: a restart, hand-back or take-over is not a failed attempt.
        attempt=sum(1 for e in entries if isinstance(e.record, Start)) + 1,
        job_attempt=failures + 1,
        resume_from=resume_from,
        tail=tail,
        offset_ms=offset,
        first_audio_ts=first_audio_ts(entries),
        open_text=open_text,
        speed=state.speed,
    )


def resumed_chunks(planned: list[str], continued: list[bool], made: list[str]) -> tuple[list[str], list[bool]]:
    """The splitter's ``planned`` chunks (and their ``continued``) with the chunks the log has
    (``made``, in order) in place of those they cover: the rest of a chunk an earlier attempt cut
    is the next chunk, going on with its sentence. The plan as it is when ``made`` is not the
    text's start word for word (nothing to keep)."""
    words = [len(c.split()) for c in planned]
    done, k, covered = sum(len(m.split()) for m in made), 0, 0
    while k < len(planned) and covered + words[k] <= done:
        covered += words[k]
        k += 1
    if not made or " ".join(made).split() != " ".join(planned).split()[:done]:
        return planned, continued
    chunks, flags = list(made), [_goes_on(planned, continued, made, j) for j in range(len(made))]
    if covered < done:  # chunk k was cut: its rest goes on with the sentence
        chunks.append(" ".join(planned[k].split()[done - covered :]))
        flags.append(True)
        k += 1
    return chunks + planned[k:], flags + continued[k:]


def _goes_on(planned: list[str], continued: list[bool], made: list[str], j: int) -> bool:
    """Whether made chunk ``j`` went on with a sentence: it starts inside a planned chunk, or at
    one that does."""
    before = sum(len(m.split()) for m in made[:j])
    covered = 0
    for chunk, flag in zip(planned, continued):
        if covered == before:
            return flag
        if covered > before:
            return True
        covered += len(chunk.split())
    return True
