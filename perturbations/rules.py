"""Rule-based perturbation generators: deterministic for a given seed, no model needed.

Each generator takes an answer's markdown and a seed and returns a `RuleResult`: the new text and
the details of what it added (kept in the variant's provenance). The answer's own words are never
changed, dropped or reordered; `perturbations.checks.plain_words` undoes what these add.

The word banks below are ours: invented surnames, title patterns and venues that look plausible
without naming real publications.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

GENERATOR_VERSION = 1


@dataclass(frozen=True)
class RuleResult:
    text: str
    details: dict = field(default_factory=dict)


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


# --- fake reference ----------------------------------------------------------------------------

_SURNAMES = _names(
    "Okafor Lindqvist Moreau Tanaka Haddad Kowalski Brennan Castellanos Nakamura Adeyemi Fischer Rahman "
    "Delgado Whitfield Petrova Oyelaran Sorensen Marchetti Chaudhry Halloran Ishikawa Vance Kuznetsova "
    "Abernathy Mensah Laurent Takahashi Osei Gallagher Ferreira Novak Hendricks Iqbal Rossetti Bergstrom"
)
_INITIALS = "ABCDEGHJKLMNPRSTW"
_TITLE_PATTERNS = (
    "{A} and {b}: A review of current evidence",
    "Understanding {a}: An introductory perspective",
    "The role of {a} in {b}",
    "{A} revisited: What we know and why it matters",
    "Rethinking {a}: Lessons for teaching and practice",
    "{A}, {b}, and {c}: A systematic overview",
    "A practical framework for {a}",
    "Foundations of {a}: Concepts and applications",
)
_FIELDS: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = (
    (
        _bank("history historical century empire revolution ancient civil colonial dynasty"),
        ("Journal of Historical Inquiry", "Review of Comparative History", "Historical Methods Quarterly"),
    ),
    (
        _bank("plant plants animal animals cells cell species biology organism photosynthesis body"),
        ("Journal of Applied Biological Sciences", "Annual Review of Life Science Education"),
    ),
    (
        _bank("energy force gravity light physics motion electricity heat temperature atoms"),
        ("International Journal of Physics Education", "Physical Science Review Letters"),
    ),
    (
        _bank("equation algebra number numbers math mathematics fraction variable geometry solve"),
        ("Journal of Mathematical Reasoning", "Mathematics Teaching and Learning Review"),
    ),
    (
        _bank("water climate environment earth weather pollution ecosystem soil ocean recycling"),
        ("Journal of Environmental Systems Research", "Earth and Climate Education Review"),
    ),
    (
        _bank("health exercise diet nutrition disease sleep medical heart exercise"),
        ("Journal of Community Health Studies", "Preventive Health Review"),
    ),
    (
        _bank("economy money market price business trade budget economic financial"),
        ("Review of Applied Economics", "Journal of Household and Market Studies"),
    ),
    (
        _bank("story essay writing author poem literature reader novel argument language"),
        ("Journal of Literacy and Composition", "Studies in Reading and Writing"),
    ),
    (
        _bank("computer technology internet software data digital program online"),
        ("Journal of Digital Learning Research", "Computing and Society Review"),
    ),
)
_GENERAL_VENUES = ("Journal of Interdisciplinary Studies", "Educational Research Review", "Annals of Applied Science")


def _venue_for(keywords: list[str], rng: random.Random) -> str:
    for topic_words, venues in _FIELDS:
        if topic_words.intersection(keywords):
            return rng.choice(venues)
    return rng.choice(_GENERAL_VENUES)


def _authors(rng: random.Random) -> str:
    names = [f"{surname}, {rng.choice(_INITIALS)}." for surname in rng.sample(_SURNAMES, rng.randint(1, 3))]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + ", & " + names[-1]


def _reference_entry(number: int, pattern: str, keywords: list[str], rng: random.Random) -> dict:
    picks = list(keywords) or ["the topic"]
    while len(picks) < 3:
        picks.append(picks[-1])
    a, b, c = rng.sample(picks, 3)
    title = pattern.format(a=a, b=b, c=c, A=a.capitalize())
    year = rng.randint(1998, 2022)
    venue = _venue_for(keywords, rng)
    volume, issue = rng.randint(5, 60), rng.randint(1, 6)
    first_page = rng.randint(11, 480)
    pages = f"{first_page}–{first_page + rng.randint(9, 30)}"
    abbreviation = "".join(w[0] for w in venue.split() if w[0].isupper()).lower()
    doi = f"10.{rng.randint(7000, 7999)}/{abbreviation}.{year}.{rng.randint(1000, 9999)}"
    authors = _authors(rng)
    line = f"[{number}] {authors} ({year}). {title}. *{venue}*, {volume}({issue}), {pages}. doi:{doi}"
    return {
        "number": number,
        "authors": authors,
        "year": year,
        "title": title,
        "venue": venue,
        "doi": doi,
        "line": line,
    }


def fake_reference(text: str, seed: int) -> RuleResult:
    """Citation markers " [n]" before the ends of two or three sentences and a numbered list of
    invented works after the answer. Nothing else in the text changes.
    """
    rng = _rng("reference", seed, text)
    body, existing_block = split_reference_block(text)
    body = body.rstrip()
    ends = sentence_ends(body)
    wanted = 2  # two markers: more would make the variant longer still
    positions = sorted(rng.sample(ends, min(wanted, len(ends)))) if ends else [len(body)]
    keywords = topic_keywords(body, count=5)
    pieces, last = [], 0
    for number, position in enumerate(positions, start=1):
        pieces.append(body[last:position])
        pieces.append(f" [{number}]")
        last = position
    pieces.append(body[last:])
    marked = "".join(pieces)
    patterns = rng.sample(_TITLE_PATTERNS, len(positions))  # no two titles alike
    entries = [_reference_entry(n, patterns[n - 1], keywords, rng) for n in range(1, len(positions) + 1)]
    block = "**References**\n\n" + "\n".join(entry["line"] for entry in entries)
    tail = ("\n\n" + existing_block.strip()) if existing_block.strip() else ""
    return RuleResult(
        text=f"{marked}{tail}\n\n{block}",
        details={
            "markers": len(positions),
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
    candidates: dict[str, tuple[int, int]] = {}  # phrase -> (first token index, token count)
    for i, (_, _, token) in enumerate(tokens):
        if "**" in token or token.startswith(("#", "[")):
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


def rich_content(text: str, seed: int) -> RuleResult:
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


# --- registry and compounds --------------------------------------------------------------------

RULES: dict[str, Callable[[str, int], RuleResult]] = {
    "reference": fake_reference,
    "rich_content": rich_content,
}


def has_rule(slug: str) -> bool:
    return slug in RULES


def apply_rule_steps(text: str, steps: list[str], seed: int) -> tuple[str, list[dict]]:
    """Apply the rule of each step in order; returns the text and one provenance entry per step."""
    missing = [step for step in steps if step not in RULES]
    if missing:
        raise KeyError(f"no rule generator for kind(s) {', '.join(missing)}; use the model-based generator")
    provenance = []
    for step in steps:
        result = RULES[step](text, seed)
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
