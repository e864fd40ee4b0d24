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

_WORD = re.compile(r"\S+")
_BARE = re.compile(r"^[\"'“‘(\[]*(.*?)[\"'”’)\].,;:!?…]*$")
_ENGLISH = re.compile(r"[A-Za-z][A-Za-z'’.-]*")


def bare(token: str) -> str:
    """A token without its surrounding quotes, brackets and punctuation, lower-cased."""
    m = _BARE.match(token)
    return (m.group(1) if m else token).lower().replace("’", "'")


def ends_phrase(before: str, after: str, *, first: bool) -> bool:
    """Whether a phrase may end between the tokens ``before`` and ``after`` (``first``:
    ``before`` is the sentence's first word, whose capital says nothing about a name)."""
    word, nxt = bare(before), bare(after)
    if not _ENGLISH.fullmatch(word) or not _ENGLISH.fullmatch(nxt):
        return False  # digits ("5 p.m."), symbols, other scripts: no phrase end known
    if word in FUNCTION_WORDS or nxt not in STRONG_OPENERS | WEAK_OPENERS:
        return False
    if before[-1:] in "-–—":  # "well-" | "known"
        return False
    # A name goes on ("New | York", "Bank of | England" is caught by "of" above).
    return not (not first and before[:1].isupper() and after[:1].isupper())


def phrase_ends(sentence: str, low: int, high: int) -> list[tuple[int, bool]]:
    """Where a phrase of ``sentence`` ends with a head of ``low`` to ``high`` characters:
    (end of the head, whether the next phrase opens strongly), in order."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(sentence)]
    out = []
    for k in range(len(tokens) - 1):
        _, end, before = tokens[k]
        after = tokens[k + 1][2]
        if low <= end <= high and ends_phrase(before, after, first=k == 0):
            out.append((end, bare(after) in STRONG_OPENERS))
    return out
