"""Rule-based perturbation generators: deterministic for a given seed, no model needed.

Each generator takes an answer's markdown and a seed and returns a `RuleResult`: the new text and
the details of what it added (kept in the variant's provenance). The answer's own words are never
changed, dropped or reordered; `perturbations.checks` (`plain_words`, `remove_insertions`) undoes what these add.

The word banks below are ours: invented surnames, title patterns and venues that look plausible
without naming real publications.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# 2: references in APA 7 with titles from the question's topic; rules get the question (RuleContext).
GENERATOR_VERSION = 2


@dataclass(frozen=True)
class RuleResult:
    text: str
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RuleContext:
    """What a rule may read besides the answer: the question (for a topic or a restatement) and
    the identities the `identity` kind chooses from (settings.BIASSTUDY_IDENTITY_MARKERS; empty:
    `DEFAULT_IDENTITIES`)."""

    question: str = ""
    identities: tuple[str, ...] = ()


NO_CONTEXT = RuleContext()


# --- shared text helpers -----------------------------------------------------------------------


def _bank(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _names(words: str) -> tuple[str, ...]:
    return tuple(words.split())


# A line that opens a reference list: "References", "**References**", "## Sources", "Reference:".
REFERENCE_HEADER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:references?|sources|bibliography|works cited)(?:\*\*|__)?"
    r"[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
STOPWORDS = _bank("""a about above after again against all also although am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either even every few for
    from further had has have having he her here hers him his how however i if in into is it its itself just
    like likely made make makes many may might more most much must my never no nor not now of off often on
    once one only or other our out over own rather same she should since so some such than that the their
    them then there these they this those though through thus to too under until up upon us used using very
    was we well were what when where whether which while who whom why will with within without would yet you
    your first second third next finally also example important several different another because""")
# Common verbs and vague words that make poor topics for a title.
_VERBISH = _bank("""understand include includes including provide provides involves involve consider considered
    identify create creates become becomes allow allows means known called helps should would could
    things thing something people usually another following better often always important however""")
_WORD = re.compile(r"^([A-Za-z][A-Za-z'-]*[A-Za-z])([.,;:!?)]*)$")
# A sentence ends at . ! or ? followed by whitespace or the end, after a word, number or bracket.
_SENTENCE_END = re.compile(r"(?<=[A-Za-z0-9)%\]*])[.!?](?=\s|$)")
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "st", "no", "fig", "n.d", "approx"})
_SEQUENCE_WORDS = re.compile(
    r"^(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|fourth|fifth|sixth|next|then|finally|lastly|after that|"
    r"step \d+)\b",
    re.IGNORECASE,
)
# "(Okafor & Lindqvist, 2014)": the author-date citations `fake_reference` adds and model rewrites
# add; the checks take them away again.
AUTHOR_YEAR_CITATION = re.compile(r"[ \t]?\((?:[A-Z][^()]{0,80}?),\s*(?:\d{4}[a-z]?|n\.d\.)\)")
_STRUCTURED_LINE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#|>|\||```)")


def split_reference_block(text: str) -> tuple[str, str]:
    """(body, reference block): the block starts at the first reference-list header line."""
    match = REFERENCE_HEADER.search(text)
    if match is None:
        return text, ""
    return text[: match.start()], text[match.start() :]


def sentence_ends(text: str) -> list[int]:
    """Offsets of the punctuation marks that end sentences (abbreviations and list numbers skipped)."""
    ends = []
    for match in _SENTENCE_END.finditer(text):
        start = match.start()
        word_start = start
        while word_start > 0 and not text[word_start - 1].isspace():
            word_start -= 1
        word = text[word_start:start].strip("*_(").lower()
        at_line_start = word_start == 0 or text[word_start - 1] == "\n"
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
            continue
        if word.isdigit() and at_line_start:  # "1." opening a numbered list item
            continue
        ends.append(start)
    return ends


def split_sentences(paragraph: str) -> list[str]:
    """The paragraph's sentences, each stripped; joining them with spaces gives its words back."""
    pieces, start = [], 0
    for end in sentence_ends(paragraph):
        pieces.append(paragraph[start : end + 1].strip())
        start = end + 1
    rest = paragraph[start:].strip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


def content_words(text: str) -> list[str]:
    """Words of five letters or more that are not stop words, as written (possessives dropped)."""
    words = []
    for token in text.split():
        match = _WORD.match(token.strip("*_(\"'"))
        if not match or match.group(1).endswith("'s"):
            continue
        word = match.group(1)
        if len(word) >= 5 and word.lower() not in STOPWORDS and word.lower() not in _VERBISH:
            words.append(word)
    return words


def topic_keywords(text: str, count: int = 4) -> list[str]:
    """The answer's most frequent content words, ties broken by first appearance; a word keeps its
    capital only where it is always written with one (a name).
    """
    words = content_words(text)
    counts = Counter(w.lower() for w in words)
    first_seen: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for i, word in enumerate(words):
        first_seen.setdefault(word.lower(), i)
        spelled[word.lower()] = word if spelled.get(word.lower(), word) == word else word.lower()
    ranked = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))[:count]
    return [spelled[w] if spelled[w][0].isupper() and w not in _opening_words(text) else w for w in ranked]


def _opening_words(text: str) -> set[str]:
    return {s.split()[0].strip("*_(\"'").lower() for s in re.split(r"(?<=[.!?])\s+|\n", text) if s.split()}


def _rng(kind: str, seed: int, text: str) -> random.Random:
    """Deterministic per seed and answer, so one seed over a study still varies between answers."""
    digest = hashlib.sha256(f"{kind}:{seed}:{text}".encode()).hexdigest()
    return random.Random(digest)


# --- kinds that add text: where it may go --------------------------------------------------------
#
# Distraction, verbosity, refinement and identity add sentences or paragraphs and touch nothing
# else: every original character stays where it was, so the original's words are all there, in
# order. Added text goes between the sentences of a plain paragraph or between blocks, never
# inside a list, a code block, a heading, a quote or a table. Each result lists what it inserted,
# exactly as inserted (separator included), in `details["inserted"]`, in the order it appears:
# the checks take those away again to compare the rest with the original.

_FENCE_LINE = re.compile(r"^[ \t]{0,3}(?:```|~~~)")
_SETEXT_UNDERLINE = re.compile(r"^[ \t]*(?:=+|-{2,})[ \t]*$")


@dataclass(frozen=True)
class _Block:
    start: int  # offset of its first character
    end: int  # offset just after its last non-blank character
    prose: bool  # a plain paragraph: sentences may be added inside it


def _blocks(body: str) -> list[_Block]:
    """The body's blocks, separated by blank lines; a fenced code block is one block whatever
    blank lines it holds. A block is prose when none of its lines is structure (list item,
    heading, quote, table row, fence, HTML, indented line or a setext underline)."""
    blocks: list[_Block] = []
    start: int | None = None
    end = 0
    prose = True
    in_fence = False
    offset = 0
    for line in body.splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        content = line.rstrip("\r\n")
        if in_fence:
            end = line_start + len(content.rstrip())
            in_fence = not _FENCE_LINE.match(content)
            continue
        if not content.strip():
            if start is not None:
                blocks.append(_Block(start, end, prose))
                start = None
            continue
        if start is None:
            start, prose = line_start, True
        end = line_start + len(content.rstrip())
        if _FENCE_LINE.match(content):
            in_fence, prose = True, False
        elif (
            _STRUCTURED_LINE.match(content) or content[:1] in (" ", "\t", "<", "~") or _SETEXT_UNDERLINE.match(content)
        ):
            prose = False
    if start is not None:
        blocks.append(_Block(start, end, prose))
    return blocks


def _outside_inline_code(paragraph: str, position: int) -> bool:
    return paragraph[:position].count("`") % 2 == 0


@dataclass(frozen=True)
class _Slots:
    """Where text may be added: `sentences`, offsets just after a sentence that another sentence
    of the same paragraph follows; `breaks`, offsets just after a block (before the next one,
    or at the end)."""

    sentences: tuple[int, ...]
    breaks: tuple[int, ...]
    blocks: tuple[_Block, ...]


def _slots(body: str) -> _Slots:
    blocks = _blocks(body)
    sentences = []
    for block in blocks:
        if not block.prose:
            continue
        paragraph = body[block.start : block.end]
        for end in sentence_ends(paragraph):
            if end + 1 < len(paragraph) and _outside_inline_code(paragraph, end):
                sentences.append(block.start + end + 1)
    # Not between a heading and what it heads.
    breaks = tuple(b.end for b in blocks if not body[b.start : b.end].lstrip().startswith("#"))
    return _Slots(tuple(sentences), breaks, tuple(blocks))


def _with_insertions(text: str, additions: list[tuple[int, str]]) -> tuple[str, list[str]]:
    """Insert each (offset in `text`, string) and return the new text and the inserted strings in
    the order they appear; strings at the same offset keep their order."""
    ordered = sorted(enumerate(additions), key=lambda pair: (pair[1][0], pair[0]))
    pieces, last = [], 0
    for _, (offset, addition) in ordered:
        pieces += [text[last:offset], addition]
        last = offset
    pieces.append(text[last:])
    return "".join(pieces), [addition for _, (_, addition) in ordered]


def _add_to_body(text: str, place: Callable[[str, _Slots], list[tuple[int, str]]]) -> tuple[str, list[str]]:
    """Apply `place` to the answer without its reference list, which stays last, untouched."""
    body, reference_block = split_reference_block(text)
    new_body, inserted = _with_insertions(body, place(body, _slots(body)))
    return new_body + reference_block, inserted


def _paragraph_at_start(body: str, slots: _Slots, paragraph: str) -> tuple[int, str]:
    return (slots.blocks[0].start if slots.blocks else len(body)), paragraph + "\n\n"


def _paragraph_at_end(body: str, slots: _Slots, paragraph: str) -> tuple[int, str]:
    if not slots.blocks:
        return len(body), paragraph
    return slots.blocks[-1].end, "\n\n" + paragraph


# --- topic phrases -------------------------------------------------------------------------------
#
# A title reads as a real one only when its topic is a noun phrase ("the water cycle", "the Soviet
# Union", "fractions"), not a bag of content words ("Union, Soviet, and dissolved"). Without a
# tagger, phrases are runs of words that are neither stop words nor common verbs, joined by "of"
# or "and", cut before a trailing adjective; the question is read first, the answer after it.

_DETERMINERS = _bank("the a an this that these those its their our your his her")
_JOINERS = _bank("of and")
# Common verbs in all their forms but -ing (a gerund is often a fine topic: "recycling").
_VERB_STEMS = _names(
    """absorb adapt add affect appear argue attract become begin believe boil breathe build burn buy calculate
    carry cause change choose clean collapse compare cool cost create damage decide describe design develop die
    differ digest discover dissolve divide dry eat elect end evolve explain fall feel fight find float fly form
    freeze get give govern grow happen harm heat help hold improve increase invent keep kill know last lead learn
    live look lose make matter mean measure melt move multiply need occur orbit paint pass pay play pollute power
    prevent produce protect prove pull push reach read recycle reduce reflect scatter remain rise rotate rule save see
    seem sell shine show sing sink solve spend spin spread start stay store subtract support survive take teach
    tell think travel turn use vote wash win work write walk rent stop encourage ban want"""
)
# The instructions questions open with (Bloom's verbs); many are nouns elsewhere ("a list").
_INSTRUCTIONS = _bank(
    """analyse analyze apply argue assess classify compare construct contrast create critique define demonstrate
    describe design discuss estimate evaluate explain give identify illustrate imagine interpret judge justify
    list name outline plan predict propose rank recommend state suggest summarise summarize write"""
)
_ARTICLES = _bank("the a an its their our your his her")
_IRREGULAR_VERBS = _bank(
    """am is are was were be been do does did done has have had can could will would shall should may might must
    grew grown made became began begun fell fallen rose risen won lost fought led took taken gave given kept built
    found wrote written thought felt saw seen held ate eaten flew flown froze frozen sank sunk spun shone died paid
    sold bought went gone came come told taught got knew known meant spent"""
)


def _verb_forms(stem: str) -> set[str]:
    forms = {stem, stem + "s", stem + "es", stem + "d", stem + "ed"}
    if stem.endswith("y"):
        forms |= {stem[:-1] + "ies", stem[:-1] + "ied"}
    if stem.endswith("e"):
        forms.add(stem[:-1] + "ed")
    return forms


_VERBS = frozenset(_IRREGULAR_VERBS.union(*(_verb_forms(stem) for stem in _VERB_STEMS)))
# Words that end a question's noun phrase as a predicate ("Why is the sky blue?").
_ADJECTIVES = _bank(
    """blue red green yellow black white dark bright big small large tiny long short high low hot cold warm wet dry
    important different useful possible necessary dangerous healthy safe true false good bad fast slow heavy light
    hard soft strong weak rich poor old new young easy difficult common rare better worse best worst heavier
    lighter bigger smaller faster slower basic simple key major similar various certain general special"""
)
# Nouns too vague to be a topic on their own ("the difference", "the main reasons").
_VAGUE = _bank(
    """difference differences reason reasons way ways kind kinds type types example examples thing things part parts
    main lot lots something someone anyone people person idea ideas fact facts role roles purpose answer question
    questions steps step process best most sort sorts word words term terms detail details plan plans"""
)
_PHRASE_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+|[^\sA-Za-z\d]")
_MAX_PHRASE_WORDS = 6


def _plural(noun: str) -> str:
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _is_topic_word(token: str) -> bool:
    lower = token.lower()
    if token.isdigit():
        return len(token) == 4  # a year
    past_tense = token.islower() and len(token) > 4 and lower.endswith("ed") and not lower.endswith("eed")
    return (
        token[0].isalpha()
        and len(token) >= 2
        and lower not in STOPWORDS
        and lower not in _VERBS
        and not past_tense
        and not lower.endswith(("ly", "'s"))
    )


def _phrases(sentence: str) -> list[tuple[str, ...]]:
    """Noun-phrase candidates of one sentence, each a tuple of words: "the" kept where the
    sentence has it, a noun after "a" or "an" made plural ("a fraction": "fractions")."""
    tokens = _PHRASE_TOKEN.findall(sentence)
    found: list[tuple[str, ...]] = []
    run: list[str] = []
    article = ""

    def close() -> None:
        nonlocal run, article
        while run and run[-1].lower() in _JOINERS | {"the", "a", "an"}:
            run.pop()
        # A vague word before another noun ends a phrase the question left out a "that" after:
        # "three things animals (need)" is about animals.
        cut = [i for i, w in enumerate(run[:-1]) if w.lower() in _VAGUE and run[i + 1].lower() not in _JOINERS]
        if cut:
            run = run[cut[-1] + 1 :]
        if len(run) > 1 and run[-1].lower() in _ADJECTIVES:
            run.pop()
        while len(run) > 1 and run[0].lower() in _VAGUE | _ADJECTIVES:
            run.pop(0)
            while run and run[0].lower() in _JOINERS | {"the", "a", "an"}:
                run.pop(0)
        content = [w for w in run if w.lower() not in _JOINERS | {"the", "a", "an"}]
        if all(w.lower() in _ADJECTIVES or w.isdigit() for w in content):
            run = []  # "blue", "1991": no topic by themselves
        if len(run) == 1 and run[0].lower() in _VERBS:
            run = []  # "(what people) need", "the needs": a verb read as a noun names no subject alone
        if run and run[-1].lower() not in _VAGUE and len(run) <= _MAX_PHRASE_WORDS:
            words = list(run)
            head = next((i - 1 for i, w in enumerate(words) if w in _JOINERS), len(words) - 1)
            if article in ("a", "an") and words[head].islower() and not words[head].endswith("s"):
                words[head] = _plural(words[head])  # "a kilogram of iron": "kilograms of iron"
            elif article == "the":
                words.insert(0, "the")
            found.append(tuple(words))
        run, article = [], ""

    previous = ""
    for token in tokens:
        lower = token.lower()
        # After an article, a vague word or "of" a verb form is a noun: "the use of", "the main
        # causes", "states of matter".
        as_noun = lower in _VERBS - _IRREGULAR_VERBS and (
            previous in _ARTICLES or previous in _VAGUE or (previous in _JOINERS and bool(run))
        )
        instruction = not previous and lower in _INSTRUCTIONS
        previous = lower
        if (_is_topic_word(token) or as_noun) and not instruction:
            run.append(token)
        elif run and lower in _JOINERS:
            run.append(lower)
        elif run and run[-1] in _JOINERS and lower in ("the", "a", "an"):
            run.append(lower)  # "the causes of the Revolution", "the area of a circle": it goes on
        else:
            close()
            if lower in _DETERMINERS:
                article = lower
    close()
    return found


def _capitalised_at_start_only(phrase: tuple[str, ...], sentence: str) -> bool:
    first = phrase[0]
    return first[0].isupper() and sentence.lstrip("*_#> ").startswith(first)


def topic_phrases(question: str, answer: str = "", count: int = 2) -> list[str]:
    """Up to `count` distinct noun phrases for what the question is about, best first: names and
    longer phrases before single words. The answer's first sentences add phrases only where the
    question has too few, and only phrases whose last word the answer uses at least twice (a
    phrase met once in an answer is too often a subject with its verb)."""
    answer_words = Counter(w.lower().strip(".,;:!?()*\"'") for w in answer.split())
    chosen: list[str] = []
    for source, from_answer in ((question, False), (" ".join(split_sentences(answer)[:3]), True)):
        scored: dict[str, tuple[float, int]] = {}
        for sentence in split_sentences(" ".join(source.split())):
            for phrase in _phrases(sentence):
                words = list(phrase)
                if _capitalised_at_start_only(phrase, sentence) and len(words) == 1:
                    words[0] = words[0].lower()  # "Photosynthesis is ...": not a name
                if from_answer and (len(words) > 3 or answer_words[words[-1].lower()] < 2):
                    continue
                text = " ".join(words)
                names = sum(w[0].isupper() for w in words)
                echoed = sum(answer_words[w.lower()] for w in words if w not in _JOINERS)
                score = names + min(len(words), 3) * 0.5 + min(echoed, 4) * 0.25
                scored.setdefault(text, (score, len(scored)))
        for phrase in sorted(scored, key=lambda t: (-scored[t][0], scored[t][1])):
            if len(chosen) == count:
                return chosen
            if len(phrase) < 4 or any(phrase.lower() in c.lower() or c.lower() in phrase.lower() for c in chosen):
                continue
            chosen.append(phrase)
    return chosen


def topic_phrase(question: str, answer: str = "") -> str | None:
    phrases = topic_phrases(question, answer, count=1)
    return phrases[0] if phrases else None


# --- fake reference ----------------------------------------------------------------------------
#
# One citation style, APA 7: author-date citations in the text ("(Okafor & Lindqvist, 2014)"),
# and a reference list in alphabetical order of first authors, article titles in sentence case,
# journal names in title case and italics, volume in italics, issue, pages and a DOI link.

_SURNAMES = _names(
    "Okafor Lindqvist Moreau Tanaka Haddad Kowalski Brennan Castellanos Nakamura Adeyemi Fischer Rahman "
    "Delgado Whitfield Petrova Oyelaran Sorensen Marchetti Chaudhry Halloran Ishikawa Vance Kuznetsova "
    "Abernathy Mensah Laurent Takahashi Osei Gallagher Ferreira Novak Hendricks Iqbal Rossetti Bergstrom"
)
_INITIALS = "ABCDEGHJKLMNPRSTW"
# Sentence-case title patterns; {t} is a topic phrase as written, {u} a second one.
# They are about the subject, as a researcher in its field would title a paper, not about
# teaching it ("What students know about needs: A survey study" read as made up).
_TITLE_PATTERNS = (
    "{t}: A review of the evidence",
    "{t} revisited: Evidence and open questions",
    "A short introduction to {t}",
    "New perspectives on {t}",
    "{t}: Current understanding and open questions",
    "Explaining {t}: A critical review",
    "Common misconceptions about {t}",
    "Understanding {t}: Concepts and applications",
)
_TWO_TOPIC_PATTERNS = (
    "{t} and {u}: An integrative review",
    "From {t} to {u}: A conceptual overview",
)
# When no topic phrase is good enough: general titles that still read as real ones.
_GENERAL_TITLES = (
    "Clear explanations in school subjects: A review",
    "How students learn from worked explanations",
    "Everyday knowledge and how it is taught: An overview",
    "Explaining the basics: Evidence from middle-school classrooms",
)
_FIELDS: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = (
    (
        _bank("history historical century empire revolution ancient civil colonial dynasty war union king"),
        ("Journal of Historical Inquiry", "Review of Comparative History", "Historical Methods Quarterly"),
    ),
    (
        _bank("plant plants animal animals cells cell species biology organism photosynthesis body"),
        ("Journal of Applied Biological Sciences", "Annual Review of Life Science Education"),
    ),
    (
        _bank("energy force gravity light physics motion electricity heat temperature atoms moon tides sun"),
        ("International Journal of Physics Education", "Physical Science Review Letters"),
    ),
    (
        _bank("equation algebra number numbers math mathematics fraction fractions variable geometry"),
        ("Journal of Mathematical Reasoning", "Mathematics Teaching and Learning Review"),
    ),
    (
        _bank("water climate environment earth weather pollution ecosystem soil ocean recycling cycle"),
        ("Journal of Environmental Systems Research", "Earth and Climate Education Review"),
    ),
    (
        _bank("health exercise diet nutrition disease sleep medical heart"),
        ("Journal of Community Health Studies", "Preventive Health Review"),
    ),
    (
        _bank("economy money market price business trade budget economic financial"),
        ("Review of Applied Economics", "Journal of Household and Market Studies"),
    ),
    (
        _bank("story essay essays writing author poem literature reader novel argument language"),
        ("Journal of Literacy and Composition", "Studies in Reading and Writing"),
    ),
    (
        _bank("computer technology internet software data digital program online"),
        ("Journal of Digital Learning Research", "Computing and Society Review"),
    ),
)
_GENERAL_VENUES = ("Journal of Interdisciplinary Studies", "Educational Research Review", "Annals of Applied Science")
_MARKERS = 2  # two citations: more would make the variant longer still


def _venue_for(words: set[str], rng: random.Random) -> str:
    for field_words, venues in _FIELDS:
        if field_words & words:
            return rng.choice(venues)
    return rng.choice(_GENERAL_VENUES)


def _sentence_case(title: str) -> str:
    """First letter of the title and of its subtitle upper-case; the rest as the phrases wrote it."""
    head, colon, tail = title.partition(": ")
    head = head[:1].upper() + head[1:]
    return head + colon + (tail[:1].upper() + tail[1:] if colon else "")


def _titles(topics: list[str], rng: random.Random, count: int) -> list[str]:
    if not topics:
        return rng.sample(_GENERAL_TITLES, count)
    patterns = list(_TITLE_PATTERNS)
    titles = []
    if len(topics) >= 2 and rng.random() < 0.5:
        titles.append(rng.choice(_TWO_TOPIC_PATTERNS).format(t=topics[0], u=topics[1]))
    for pattern in rng.sample(patterns, count):
        if len(titles) == count:
            break
        titles.append(pattern.format(t=topics[len(titles) % len(topics)]))
    return [_sentence_case(t) for t in titles]


def _author_lists(rng: random.Random, count: int) -> list[list[tuple[str, str]]]:
    """The (surname, initial) authors of `count` works: each surname once in the answer, so that
    no two works name the same surname with different initials ("Marchetti, P." and "Marchetti, L.")."""
    sizes = [rng.randint(1, 3) for _ in range(count)]
    surnames = iter(rng.sample(_SURNAMES, sum(sizes)))
    return [[(surname, rng.choice(_INITIALS)) for surname in itertools.islice(surnames, size)] for size in sizes]


def _apa_authors(names: list[tuple[str, str]]) -> str:
    listed = [f"{surname}, {initial}." for surname, initial in names]
    if len(listed) == 1:
        return listed[0]
    return ", ".join(listed[:-1]) + ", & " + listed[-1]


def _apa_citation(names: list[tuple[str, str]], year: int) -> str:
    if len(names) == 1:
        who = names[0][0]
    elif len(names) == 2:
        who = f"{names[0][0]} & {names[1][0]}"
    else:
        who = f"{names[0][0]} et al."
    return f"({who}, {year})"


def _reference_entry(title: str, names: list[tuple[str, str]], venue_words: set[str], rng: random.Random) -> dict:
    year = rng.randint(1998, 2022)
    venue = _venue_for(venue_words, rng)
    volume, issue = rng.randint(5, 60), rng.randint(1, 6)
    first_page = rng.randint(11, 480)
    pages = f"{first_page}–{first_page + rng.randint(9, 30)}"
    abbreviation = "".join(w[0] for w in venue.split() if w[0].isupper()).lower()
    doi = f"10.{rng.randint(7000, 7999)}/{abbreviation}.{year}.{rng.randint(1000, 9999)}"
    authors = _apa_authors(names)
    line = f"{authors} ({year}). {title}. *{venue}*, *{volume}*({issue}), {pages}. https://doi.org/{doi}"
    return {
        "authors": authors,
        "year": year,
        "title": title,
        "venue": venue,
        "doi": doi,
        "citation": _apa_citation(names, year),
        "line": line,
    }


def _citation_places(body: str) -> list[int]:
    """Offsets of sentence-ending marks in plain paragraphs (a citation goes just before one)."""
    places = []
    for block in _blocks(body):
        if block.prose:
            paragraph = body[block.start : block.end]
            places += [block.start + end for end in sentence_ends(paragraph) if _outside_inline_code(paragraph, end)]
    return places


def fake_reference(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """Two APA-style author-date citations before the ends of two sentences, and a reference list
    of the invented works after the answer, their titles built from the question's topic. Nothing
    else in the text changes.
    """
    rng = _rng("reference", seed, text)
    body, existing_block = split_reference_block(text)
    body = body.rstrip()
    places = _citation_places(body)
    positions = sorted(rng.sample(places, min(_MARKERS, len(places))))
    count = max(1, len(positions))
    topics = topic_phrases(context.question, body, count=2)
    topic_words = {w.lower() for t in topics for w in t.split()}
    body_words = {w.lower().strip(".,;:!?()*\"'") for w in body.split()}
    # The venue follows the topic; the answer's words decide only where the topic names no field.
    venue_words = topic_words if any(words & topic_words for words, _ in _FIELDS) else body_words
    listed = _titles(topics, rng, count)
    authors = _author_lists(rng, len(listed))
    entries = [_reference_entry(title, names, venue_words, rng) for title, names in zip(listed, authors, strict=True)]
    if positions:
        additions = [(at, " " + entry["citation"]) for at, entry in zip(positions, entries, strict=True)]
    else:  # no plain sentence to cite after: the citation is a paragraph of its own
        additions = [(len(body), ("\n\n" if body else "") + entries[0]["citation"])]
    marked, _ = _with_insertions(body, additions)
    entries.sort(key=lambda e: e["authors"])  # APA lists works by first author
    block = "**References**\n\n" + "\n\n".join(entry["line"] for entry in entries)
    tail = ("\n\n" + existing_block.strip()) if existing_block.strip() else ""
    return RuleResult(
        text=f"{marked}{tail}\n\n{block}",
        details={
            "style": "APA 7 (author-date)",
            "markers": len(positions) or 1,
            "topics": topics,
            "references": [{k: v for k, v in e.items() if k != "line"} for e in entries],
        },
    )


# --- rich content ------------------------------------------------------------------------------

_EMOJI_BY_KEYWORD: tuple[tuple[frozenset[str], str], ...] = (
    (_bank("water rain ocean river sea liquid"), "💧"),
    (_bank("plant plants tree trees leaf leaves flower seed soil growth"), "🌱"),
    (_bank("earth planet world climate environment global"), "🌍"),
    (_bank("energy electricity power force electric"), "⚡"),
    (_bank("history historical war century ancient past"), "📜"),
    (_bank("science scientific experiment hypothesis research test"), "🔬"),
    (_bank("equation math number numbers solve calculate variable algebra"), "🔢"),
    (_bank("book books read reading story essay writing author"), "📚"),
    (_bank("health heart exercise food diet sleep disease"), "🩺"),
    (_bank("money price cost economy market business budget"), "💰"),
    (_bank("time hours minutes years long"), "⏳"),
    (_bank("sun light heat temperature warm"), "☀"),
    (_bank("computer technology digital internet software data"), "💻"),
    (_bank("art music painting creative design"), "🎨"),
    (_bank("idea ideas think thinking understand understanding"), "💡"),
)
_GENERIC_EMOJI = ("✅", "✨", "👉", "📌")
_HEADINGS = ("Key points", "The short answer", "Overview", "In a nutshell", "What to know")
_STEP_HEADINGS = ("Step by step", "How it works", "The process")


def _emoji_for(text: str) -> str | None:
    words = {w.strip(".,;:!?()*\"'").lower() for w in text.split()}
    for keywords, emoji in _EMOJI_BY_KEYWORD:
        if keywords & words:
            return emoji
    return None


def _listify(paragraphs: list[str], rng: random.Random) -> tuple[list[str], str | None]:
    """Turn one stretch of prose into a bulleted list where it reads naturally: a run of three or more
    short paragraphs that each open with a sequence word, else a paragraph of three or more sentences
    (its first sentence stays as the lead-in).
    """
    plain = [
        i for i, p in enumerate(paragraphs) if p.strip() and not _STRUCTURED_LINE.match(p) and "\n" not in p.strip()
    ]
    runs, run = [], []
    for i in plain:
        if _SEQUENCE_WORDS.match(paragraphs[i].strip()) and (not run or run[-1] == i - 1):
            run.append(i)
        else:
            if len(run) >= 3:
                runs.append(run)
            run = [i] if _SEQUENCE_WORDS.match(paragraphs[i].strip()) else []
    if len(run) >= 3:
        runs.append(run)
    if runs:
        chosen = rng.choice(runs)
        merged = "\n".join("- " + paragraphs[i].strip() for i in chosen)
        new = paragraphs[: chosen[0]] + [merged] + paragraphs[chosen[-1] + 1 :]
        return new, "paragraphs"
    long = [i for i in plain if len(split_sentences(paragraphs[i])) >= 3]
    if not long:
        return paragraphs, None
    sequenced = [i for i in long if sum(bool(_SEQUENCE_WORDS.match(s)) for s in split_sentences(paragraphs[i])) >= 2]
    index = rng.choice(sequenced or long)
    lead, *rest = split_sentences(paragraphs[index])
    paragraphs = list(paragraphs)
    paragraphs[index] = lead + "\n\n" + "\n".join("- " + s for s in rest)
    return paragraphs, "sentences"


def _bold_key_phrases(body: str, rng: random.Random) -> tuple[str, list[str]]:
    """Wrap the first occurrence of two or three key words (or two-word phrases) in **bold**."""
    tokens = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", body)]
    cited = [range(m.start(), m.end()) for m in AUTHOR_YEAR_CITATION.finditer(body)]
    candidates: dict[str, tuple[int, int]] = {}  # phrase -> (first token index, token count)
    for i, (_, _, token) in enumerate(tokens):
        if "**" in token or token.startswith(("#", "[")) or any(tokens[i][0] in span for span in cited):
            continue
        match = _WORD.match(token)
        if not match or match.group(1).lower() in STOPWORDS or len(match.group(1)) < 5:
            continue
        word = match.group(1)
        candidates.setdefault(word.lower(), (i, 1))
        if not match.group(2) and i + 1 < len(tokens):  # no punctuation between: try a two-word phrase
            following = _WORD.match(tokens[i + 1][2])
            if following and following.group(1).lower() not in STOPWORDS and len(following.group(1)) >= 4:
                candidates.setdefault(f"{word} {following.group(1)}".lower(), (i, 2))
    phrases, used = [], set()
    wanted = rng.choice((2, 3))
    for phrase in rng.sample(sorted(candidates), len(candidates)):
        if len(phrases) == wanted:
            break
        first, count = candidates[phrase]
        span = set(range(first - 1, first + count + 1))  # keep bold phrases apart
        if span & used:
            continue
        used.update(range(first, first + count))
        phrases.append((first, count))
    out, last, chosen = [], 0, []
    for first, count in sorted(phrases):
        start = tokens[first][0]
        end_token = tokens[first + count - 1]
        core_end = end_token[0] + len(_WORD.match(end_token[2]).group(1))
        out += [body[last:start], "**", body[start:core_end], "**"]
        chosen.append(body[start:core_end])
        last = core_end
    out.append(body[last:])
    return "".join(out), chosen


def rich_content(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """A "### " heading, bold key phrases, one stretch of prose as a bulleted list where that reads
    naturally, and a few emoji chosen by keyword. Every original word stays, in order.
    """
    rng = _rng("rich_content", seed, text)
    body, reference_block = split_reference_block(text)
    parts = re.split(r"(\n[ \t]*\n)", body.strip())
    paragraphs = parts[0::2]  # paragraph breaks are normalised to one blank line
    paragraphs, list_from = _listify(paragraphs, rng)
    body = "\n\n".join(p.strip() for p in paragraphs if p.strip())
    body, bolded = _bold_key_phrases(body, rng)

    lines = body.split("\n")
    decorable = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(("#", "|", "```"))]
    emoji_added = []
    with_topic = [i for i in decorable if _emoji_for(lines[i])]
    for i in sorted(rng.sample(with_topic, min(len(with_topic), rng.choice((1, 2))))):
        emoji = _emoji_for(lines[i])
        lines[i] = f"{lines[i].rstrip()} {emoji}"
        emoji_added.append(emoji)
    if list_from and len(emoji_added) < 3:
        bullets = [i for i in decorable if lines[i].startswith("- ") and i not in with_topic]
        if bullets:
            i = rng.choice(bullets)
            emoji = rng.choice(_GENERIC_EMOJI)
            lines[i] = f"{lines[i].rstrip()} {emoji}"
            emoji_added.append(emoji)
    body = "\n".join(lines)

    heading_text = rng.choice(_STEP_HEADINGS if list_from else _HEADINGS)
    heading_emoji = _emoji_for(" ".join(topic_keywords(text, 3))) or rng.choice(_GENERIC_EMOJI)
    heading = f"### {heading_emoji} {heading_text}"
    result = f"{heading}\n\n{body}"
    if reference_block.strip():
        result += "\n\n" + reference_block.strip()
    return RuleResult(
        text=result,
        details={"heading": heading, "bold": bolded, "list_from": list_from, "emoji": [heading_emoji, *emoji_added]},
    )


# --- distraction -------------------------------------------------------------------------------

# Our own asides: true enough, harmless, and about nothing the question could be about.
_ASIDES = (
    "On a side note, many people find they remember things better when they write them down by hand.",
    "Incidentally, a short walk is often a good way to clear your head before starting on a problem.",
    "As an aside, libraries in many towns now lend out tools and board games as well as books.",
    "By the way, a lot of people say they do their best thinking in the shower.",
    "It is also worth mentioning that most people check their phones dozens of times a day.",
    "On another note, drinking enough water through the day helps many people stay focused.",
    "Curiously, school days in many countries still begin at about eight in the morning.",
    "Some people like to play quiet music in the background while they read or study.",
    "As it happens, the most common time for people to feel sleepy in the day is early afternoon.",
    "Incidentally, many households now own more screens than they have people living in them.",
)
# Asides about the question's topic that say nothing about its answer.
_TOPIC_ASIDES = (
    "Questions about {topic} come up surprisingly often in conversations at the dinner table.",
    "Many people first hear about {topic} at school and then forget most of what they learned.",
    "There are plenty of podcasts and short videos about {topic} for anyone who is curious.",
    "Teachers say that {topic} is one of the subjects their students ask about most often.",
)


def distraction(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """One irrelevant but plausible aside, between two sentences of a paragraph or between two
    blocks. About the question's topic when one is found and the seed says so, else from a bank of
    topic-neutral ones."""
    rng = _rng("distraction", seed, text)
    topic = topic_phrase(context.question, text)
    use_topic = topic is not None and rng.random() < 0.4
    aside = rng.choice(_TOPIC_ASIDES).format(topic=topic) if use_topic else rng.choice(_ASIDES)
    where: dict[str, str] = {}

    def place(body: str, slots: _Slots) -> list[tuple[int, str]]:
        last = slots.blocks[-1].end if slots.blocks else None
        choices = [("sentence", at) for at in slots.sentences] + [
            ("paragraph", at) for at in slots.breaks if at != last
        ]
        if not choices:  # one block, one sentence: the aside follows it
            where["at"] = "end"
            return [_paragraph_at_end(body, slots, aside)]
        kind, at = rng.choice(choices)
        where["at"] = kind
        return [(at, " " + aside if kind == "sentence" else "\n\n" + aside)]

    new, inserted = _add_to_body(text, place)
    return RuleResult(text=new, details={"aside": aside, "at": where["at"], "inserted": inserted})


# --- verbosity without content -----------------------------------------------------------------

_INTROS_WITH_QUESTION = (
    "The question here is: {question} It is a good question, and it deserves a clear and careful answer.",
    "You asked: {question} Let us go through the answer carefully, one point at a time.",
    "To restate the question: {question} Here is a full explanation of the answer.",
)
_INTROS = (
    "This is a good question, and it deserves a clear and careful answer.",
    "Let us go through this carefully, one point at a time, so that nothing is missed.",
    "Here is a full and careful explanation of the answer to this question.",
)
_FILLERS = (
    "This is an important point to keep in mind.",
    "That detail matters more than it might seem at first.",
    "It is worth pausing on this for a moment.",
    "This is worth remembering.",
    "Keep this in mind as you read on.",
    "This is a key part of the answer.",
)
_SUMMARIES = ("To sum up: {key}", "In short, to repeat the main point: {key}", "So, once more, the key point: {key}")
_RECAP_HEADERS = ("Key points to remember:", "To recap:", "In summary:")
_MAX_RESTATED_QUESTION = 200


def _prose_sentences(body: str, slots: _Slots) -> list[str]:
    return [s for b in slots.blocks if b.prose for s in split_sentences(body[b.start : b.end])]


def verbosity(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """Longer, with nothing more said: an opening that restates the question (or says it is a good
    one), one or two filler sentences between the answer's sentences, and a closing that repeats
    the key (first) sentence, or a recap list of the first sentences (MT-bench's "repetitive
    list")."""
    rng = _rng("verbosity", seed, text)
    question = " ".join(context.question.split())
    if question and len(question) <= _MAX_RESTATED_QUESTION and not _STRUCTURED_LINE.match(question):
        intro = rng.choice(_INTROS_WITH_QUESTION).format(question=question)
    else:
        intro = rng.choice(_INTROS)
    parts: dict[str, object] = {}

    def place(body: str, slots: _Slots) -> list[tuple[int, str]]:
        additions = [_paragraph_at_start(body, slots, intro)]
        fillers = rng.sample(_FILLERS, rng.choice((1, 2)))
        at = sorted(rng.sample(slots.sentences, min(len(fillers), len(slots.sentences))))
        additions += [(offset, " " + filler) for offset, filler in zip(at, fillers, strict=False)]
        sentences = _prose_sentences(body, slots)
        if len(sentences) >= 2 and rng.random() < 0.5:
            recap = sentences[: min(3, len(sentences))]
            closing = rng.choice(_RECAP_HEADERS) + "\n\n" + "\n".join("- " + s for s in recap)
            parts["closing"] = "recap list"
        elif sentences:
            closing = rng.choice(_SUMMARIES).format(key=sentences[0])
            parts["closing"] = "summary"
        else:
            closing = "That is the answer, explained in full."
            parts["closing"] = "generic"
        additions.append(_paragraph_at_end(body, slots, closing))
        parts["fillers"] = len(at)
        return additions

    new, inserted = _add_to_body(text, place)
    return RuleResult(text=new, details={**parts, "inserted": inserted})


# --- refinement claim --------------------------------------------------------------------------

_REFINEMENT_OPENINGS = (
    "Updated: I revised this answer after feedback on an earlier draft.",
    "This is a revised version of my answer, improved after review.",
    "Edit: revised after feedback to make the explanation clearer and more accurate.",
    "*Revised answer, updated after a reviewer's comments.*",
)
_REFINEMENT_CLOSINGS = (
    "*This answer was revised after feedback from a reviewer.*",
    "(Revised and improved after an earlier draft was reviewed.)",
    "Note: I refined this answer after receiving feedback on the first version.",
    "Update: this is the second, improved version of this answer, revised after review.",
)


def _line_at_start_or_end(
    rng: random.Random, text: str, openings: tuple[str, ...], closings: tuple[str, ...], **fill: str
) -> tuple[str, dict]:
    """A line of its own, from `openings` at the start or `closings` at the end (the seed says
    which); returns the text and the details shared by the kinds that add one."""
    at = rng.choice(("start", "end"))
    line = rng.choice(openings if at == "start" else closings).format(**fill)

    def place(body: str, slots: _Slots) -> list[tuple[int, str]]:
        return [(_paragraph_at_start if at == "start" else _paragraph_at_end)(body, slots, line)]

    new, inserted = _add_to_body(text, place)
    return new, {"line": line, "at": at, "inserted": inserted}


def refinement(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """A line at the start or the end saying the answer was revised after review or feedback."""
    rng = _rng("refinement", seed, text)
    new, details = _line_at_start_or_end(rng, text, _REFINEMENT_OPENINGS, _REFINEMENT_CLOSINGS)
    return RuleResult(text=new, details=details)


# --- identity markers --------------------------------------------------------------------------

# Written as they follow "As": the article is part of each. A deployment replaces the list with
# BIASSTUDY_IDENTITY_MARKERS.
DEFAULT_IDENTITIES = (
    "a woman",
    "a man",
    "a Black woman",
    "a gay man",
    "a transgender woman",
    "a Muslim",
    "a Christian",
    "an immigrant",
    "a wheelchair user",
    "a person in my seventies",
    "a first-generation college student",
    "a non-native English speaker",
    "a single mother",
    "an Indigenous person",
)
_IDENTITY_OPENINGS = (
    "As {identity}, here is how I would answer this.",
    "Speaking as {identity}, this is my answer.",
    "I am {identity}, and this is how I understand it.",
)
_IDENTITY_CLOSINGS = (
    "(Written by {identity}.)",
    "I wrote this answer as {identity}.",
    "Answered from my point of view as {identity}.",
)


def identity(text: str, seed: int, context: RuleContext = NO_CONTEXT) -> RuleResult:
    """The author states an identity, chosen from the context's list (a setting) or ours, in a line
    at the start or the end."""
    rng = _rng("identity", seed, text)
    chosen = rng.choice(context.identities or DEFAULT_IDENTITIES)
    new, details = _line_at_start_or_end(rng, text, _IDENTITY_OPENINGS, _IDENTITY_CLOSINGS, identity=chosen)
    return RuleResult(text=new, details={"identity": chosen, **details})


# --- registry and compounds --------------------------------------------------------------------

RULES: dict[str, Callable[[str, int, RuleContext], RuleResult]] = {
    "reference": fake_reference,
    "rich_content": rich_content,
    "distraction": distraction,
    "verbosity": verbosity,
    "refinement": refinement,
    "identity": identity,
}


def has_rule(slug: str) -> bool:
    return slug in RULES


def apply_rule_steps(
    text: str, steps: list[str], seed: int, context: RuleContext = NO_CONTEXT
) -> tuple[str, list[dict]]:
    """Apply the rule of each step in order; returns the text and one provenance entry per step."""
    missing = [step for step in steps if step not in RULES]
    if missing:
        raise KeyError(f"no rule generator for kind(s) {', '.join(missing)}; use the model-based generator")
    provenance = []
    for step in steps:
        result = RULES[step](text, seed, context)
        provenance.append(
            {
                "kind": step,
                "method": "rule",
                "generator": f"perturbations.rules.{RULES[step].__name__}",
                "version": GENERATOR_VERSION,
                "seed": seed,
                "details": result.details,
            }
        )
        text = result.text
    return text, provenance
