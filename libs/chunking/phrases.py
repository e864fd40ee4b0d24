"""Where an English phrase may end inside a clause: between a content word and a function word
that opens the next phrase ("a castle | of sand", "closes early | on Sundays"), the old
"chinks and chunks" rule of text-to-speech phrasing. Never after a function word (an article,
determiner, possessive, preposition, conjunction, auxiliary: "water the | plants" sounds like a
sentence ending on "the"), never inside a number with its unit ("5 | p.m.") or a name
("New | York"). A closed-class word list is enough for English; a sentence with no English
function word after a content word has no phrase end (other languages keep their clauses whole).
"""

from __future__ import annotations

import re

from .textsteps import spend

_ARTICLES = "a an the"
_DETERMINERS = (
    "this that these those each every either neither some any no all both half several many much more most few "
    "fewer less least other another such what which whose whichever whatever"
)
_POSSESSIVES = "my your his her its our their mine yours hers ours theirs one's"
_PRONOUNS = "i me you he him she it we us they them who whom myself yourself himself herself itself ourselves themselves"
_PREPOSITIONS = (
    "of in on at to for from by with without within into onto upon about above across after against along among "
    "around as before behind below beneath beside besides between beyond but despite down during except inside "
    "like near off out outside over past since than through throughout till toward towards under underneath "
    "until unlike up via per"
)
_CONJUNCTIONS = "and or nor so yet because although though while whereas if unless whether when whenever where once"
_AUXILIARIES = (
    "am is are was were be been being do does did have has had having will would shall should can could may might "
    "must ought i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd she'd we'd "
    "they'd i'll you'll he'll she'll we'll they'll isn't aren't wasn't weren't don't doesn't didn't haven't "
    "hasn't hadn't won't wouldn't can't couldn't shouldn't mustn't"
)
# Words that lean on the next one: never the last word of a phrase.
_LEANING = "not very too quite rather so just even only also almost about than"
_NUMBERS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "billion first second third dozen"
)

# Never the word before a cut.
FUNCTION_WORDS = frozenset(
    " ".join((_ARTICLES, _DETERMINERS, _POSSESSIVES, _PRONOUNS, _PREPOSITIONS, _CONJUNCTIONS, _AUXILIARIES,
              _LEANING, _NUMBERS)).split()
)
# Words that open a phrase: a cut goes before one. Prepositions and conjunctions open the
# strongest boundaries; articles, determiners, possessives and pronouns weaker ones.
STRONG_OPENERS = frozenset(f"{_PREPOSITIONS} {_CONJUNCTIONS}".split()) | {"that", "which", "who", "whose"}
WEAK_OPENERS = frozenset(f"{_ARTICLES} {_DETERMINERS} {_POSSESSIVES} {_PRONOUNS}".split()) - STRONG_OPENERS

OPENERS = STRONG_OPENERS | WEAK_OPENERS

_WORD = re.compile(r"\S+")
# What bare() strips: str.strip with these is linear where a lazy regex was quadratic on a token
# such as "....x".
_OPENING = "\"'“‘(["
_CLOSING = "\"'”’)].,;:!?…"
_ENGLISH = re.compile(r"[A-Za-z][A-Za-z'’.-]*")


def bare(token: str) -> str:
    """A token (no white space) without its surrounding quotes, brackets and punctuation, lower-cased."""
    spend(len(token))
    return token.lstrip(_OPENING).rstrip(_CLOSING).lower().replace("’", "'")


def ends_phrase(before: str, after: str, *, first: bool) -> bool:
    """Whether a phrase may end between the tokens ``before`` and ``after`` (``first``:
    ``before`` is the sentence's first word, whose capital says nothing about a name)."""
    word, nxt = bare(before), bare(after)
    if not _ENGLISH.fullmatch(word) or not _ENGLISH.fullmatch(nxt):
        return False  # digits ("5 p.m."), symbols, other scripts: no phrase end known
    if word in FUNCTION_WORDS or nxt not in OPENERS:
        return False
    if before[-1:] in "-–—":  # "well-" | "known"
        return False
    # A name goes on ("New | York", "Bank of | England" is caught by "of" above).
    return not (not first and before[:1].isupper() and after[:1].isupper())


def phrase_ends(sentence: str, low: int, high: int, *, start: int = 0) -> list[tuple[int, bool]]:
    """Where a phrase of ``sentence[start:]`` ends with a head of ``low`` to ``high`` characters:
    (end of the head in ``sentence``, whether the next phrase opens strongly), in order.

    Reads only the words up to ``high`` and the one after (a long sentence is cut many times:
    reading all of it at every cut was quadratic)."""
    out: list[tuple[int, bool]] = []
    window = start + high + 1  # a word reaching this far ends past high: no later word is a head's end
    words = _WORD.finditer(sentence, start, window)
    before = next(words, None)
    first = True
    while before is not None and before.end() < window:
        spend(before.end() - before.start() + 1)
        after = next(words, None)
        if after is None or after.end() == window:  # the next word, whole, wherever it ends
            after = _WORD.search(sentence, before.end())
        if after is None:
            break
        if low <= before.end() - start and ends_phrase(before.group(0), after.group(0), first=first):
            out.append((before.end(), bare(after.group(0)) in STRONG_OPENERS))
        before, first = after, False
    return out
