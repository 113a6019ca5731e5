"""PRD's Vicuna-80 votes (Li, Patel, Du 2023, "PRD: Peer Rank and Discussion Improve Large Language
Model based Evaluations"; ``../shared/datasets/prd_vicuna80_lfqa``, its README describes the files).

``path`` is the dataset folder (with ``vicuna80/`` and ``qlora_vicuna/``). What becomes what:

- One question per (Vicuna question, unordered pair of systems), external id
  ``prd-<qid>-<system>-vs-<system>`` with A1/A2 = the two systems in alphabetical order, so every
  judge's votes on the same pair meet on the same item. The pairs of one Vicuna question share
  its prompt key ``prd-<qid>`` (``Question.prompt_key``): the analysis clusters them as one. Each answer keeps its system
  (``Answer.system``: bard, claude, gpt35, gpt4, vicuna-13b, guanaco-7b/13b/33b/65b).
- Answers: ``vicuna80/generations/answer_<system>.jsonl``; Guanaco's from
  ``qlora_vicuna/generations`` (``generation_truncated``: the reply cut at the model's own next
  "### Human:" turn, which 36 of the 320 raw generations run on into; QLoRA's ``30b`` is the
  human files' ``guanaco-33b``).
- LLM judges ``prd-gpt4``, ``prd-claude``, ``prd-gpt35``, ``prd-bard``, ``prd-vicuna-13b``:
  ``vicuna80/ratings-<judge>/answer_X-vs-answer_Y-*.jsonl``, X shown first (Assistant 1); each
  row's ``answer1_id``/``answer2_id`` must be X's and Y's answer. GPT-3.5 judged gpt35 vs gpt4
  twice in each order (two files per order; the one named like the other 20 is round 0, the
  other round 1: a repetition of the same request). GPT-4's votes on pairs with a Guanaco system
  come from ``qlora_vicuna/ratings-gpt4-pairwise`` (the same judge and prompt; its other 12
  files are byte-identical to PRD's and are not read twice).
- People: ``vicuna80/ratings-human`` → judge ``prd-human``, counted as human votes
  (``Parsed.people``) although the files carry no worker ids (no rater per vote). The file
  orientation X-vs-Y is taken as the order shown (X first): the two orientations of a pair
  cover disjoint halves of the questions, as a counterbalanced design would; this is the
  dataset README's inference, not documented by the authors.
- Scores: 1 = Assistant 1 (X) better, 2 = Assistant 2 (Y) better, 3 = tie; QLoRA's −1 (its
  parser found no verdict in GPT-4's review, 13 rows) is kept as a vote without a choice
  (``parse_status`` invalid), which the analysis counts under "no_choice".
- Vicuna categories become Bloom levels by ``VICUNA_BLOOM`` (ours; Vicuna-80 has none).
"""

from __future__ import annotations

import re
from pathlib import Path

from annotations.study_files import Problems
from vote_imports.importers import (
    AnswerRecord,
    ImportProblem,
    Parsed,
    QuestionRecord,
    VoteRecord,
    _add_answer,
    _add_item,
    _add_question,
    _jsonl,
    _jsonl_numbered,
    every_problem,
)

VICUNA_BLOOM = {
    "generic": "understanding",
    "knowledge": "remembering",
    "common-sense": "understanding",
    "roleplay": "creating",
    "writing": "creating",
    "counterfactual": "creating",
    "fermi": "analyzing",
    "coding": "applying",
    "math": "applying",
}
LLM_JUDGES = {name: f"prd-{name}" for name in ("gpt4", "claude", "gpt35", "bard", "vicuna-13b")}
HUMAN_JUDGE = "prd-human"
# QLoRA's file names → the systems as PRD's human files name them.
QLORA_SYSTEMS = {
    "7b-guanaco-vicuna-generations-topp0.9-temp0.7": "guanaco-7b",
    "13b-guanaco-vicuna-generations-topp0.9-temp0.7": "guanaco-13b",
    "30b-guanaco-vicuna-generations-topp0.9-temp0.7": "guanaco-33b",
    "65b-guanaco-vicuna-generations-topp0.9-temp0.7": "guanaco-65b",
}
PAIR_FILE = re.compile(
    r"^answer[-_](?P<x>.+?)-vs-answer[-_](?P<y>.+?)-(?P<judge>human|gpt4|claude|gpt35|bard|vicuna-13b)-"
)
QLORA_FILE = re.compile(r"^(?P<x>.+?)-vs-(?P<y>.+?)-gpt-4-reviewer-threeclass\.jsonl$")
SCORES = {1: "first", 2: "second", 3: "tie", -1: None}


@every_problem
def parse_prd(
    path: Path, *, problems: Problems, known_groups: set[str] = frozenset(), limit: int | None = None
) -> Parsed:
    """Every question, answer and vote of the folder (``known_groups`` is not used: no
    perturbations). ``limit``: only the first N votes (files in name order)."""
    root = path.parent if path.name == "vicuna80" else path
    vicuna = root / "vicuna80"
    if not (vicuna / "prompts" / "vicuna_questions.jsonl").exists():
        raise ImportProblem(
            path, None, None, "expected the PRD dataset folder (with vicuna80/prompts/vicuna_questions.jsonl)"
        )
    by_id = {
        q["question_id"]: q
        for q in _jsonl(vicuna / "prompts" / "vicuna_questions.jsonl", ("question_id", "text"), problems)
    }
    texts, answer_ids = _answers(root, set(by_id), problems)
    questions: dict[str, QuestionRecord] = {}
    votes: list[VoteRecord] = []
    for vote_file, judge, x, y, vote_round in _vote_files(root, problems):
        for line, row in _jsonl_numbered(vote_file, ("question_id", "score"), problems):
            if limit is not None and len(votes) >= limit:
                break
            where = (vote_file, line)
            vote = problems.check(_vote, row, where, judge, x, y, vote_round, by_id, texts, answer_ids, questions)
            if vote is not None:
                votes.append(vote)
    if not votes and not problems.count():
        raise ImportProblem(path, None, None, "no votes in the folder")
    return Parsed(source=str(path), questions=questions, votes=votes, people={HUMAN_JUDGE})


def _vote(row: dict, where: tuple, judge: str, x: str, y: str, vote_round: int, by_id, texts, answer_ids, questions):
    """One line of a ratings file as a vote on the pair's question (made on its first vote)."""
    vote_file, line = where
    qid, score = row["question_id"], row["score"]
    if qid not in by_id:
        raise ImportProblem(*where, "question_id", f"{qid!r} is not in vicuna_questions.jsonl")
    if score not in SCORES:
        raise ImportProblem(*where, "score", f"{score!r} is not 1, 2 or 3 (or -1: no verdict)")
    for system, key in ((x, "answer1_id"), (y, "answer2_id")):
        if (qid, system) not in texts:
            raise ImportProblem(*where, key, f"no answer of {system!r} to question {qid}")
        if key in row and row[key] in answer_ids and answer_ids[row[key]] != (qid, system):
            raise ImportProblem(*where, key, f"{row[key]!r} is not {system!r}'s answer to question {qid}")
    first, second = sorted((x, y))
    external = f"prd-{qid}-{first}-vs-{second}"
    q = by_id[qid]
    question = _add_question(
        questions,
        QuestionRecord(
            external, q["text"], VICUNA_BLOOM.get(q.get("category"), "understanding"), prompt_key=f"prd-{qid}"
        ),
        *where,
    )
    for system in (first, second):
        answer = AnswerRecord(f"{external}-{system}", texts[(qid, system)], system=system)
        _add_answer(question, answer, *where, "question_id")
    _add_item(question, "control", (f"{external}-{first}", f"{external}-{second}"), *where)
    shown_first = "a1" if x == first else "a2"
    choice = SCORES[score]
    winner = choice if choice in (None, "tie") else (shown_first if choice == "first" else _other(shown_first))
    return VoteRecord(
        question=external,
        group="control",
        judge=judge,
        winner=winner,
        shown_first=shown_first,
        round=vote_round,
        meta={"source": vote_file.name, "line": line, "score": score},
    )


def _other(side: str) -> str:
    return "a2" if side == "a1" else "a1"


def _answers(
    root: Path, question_ids: set[int], problems: Problems
) -> tuple[dict[tuple[int, str], str], dict[str, tuple[int, str]]]:
    """(question id, system) → answer text, and PRD's answer ids → (question id, system)."""
    texts: dict[tuple[int, str], str] = {}
    answer_ids: dict[str, tuple[int, str]] = {}
    for file in sorted((root / "vicuna80" / "generations").glob("answer_*.jsonl")):
        system = file.stem.removeprefix("answer_")
        for row in _jsonl(file, ("question_id", "text", "answer_id"), problems):
            texts[(row["question_id"], system)] = row["text"]
            answer_ids[row["answer_id"]] = (row["question_id"], system)
    for stem, system in QLORA_SYSTEMS.items():
        file = root / "qlora_vicuna" / "generations" / f"{stem}.jsonl"
        if file.exists():
            for row in _jsonl(file, ("question_id", "generation_truncated"), problems):
                texts[(row["question_id"], system)] = row["generation_truncated"]
    unknown = {qid for qid, _ in texts} - question_ids
    if unknown:
        problems.add(
            ImportProblem(
                root / "vicuna80" / "generations", None, "question_id", f"unknown questions {sorted(unknown)}"
            )
        )
    return texts, answer_ids


def _vote_files(root: Path, problems: Problems) -> list[tuple[Path, str, str, str, int]]:
    """(file, judge, system shown first, system shown second, round) for every vote file."""
    out = []
    for judge in ("human", *LLM_JUDGES):
        folder = root / "vicuna80" / f"ratings-{judge}"
        seen: dict[tuple[str, str], int] = {}
        # A pair's file named like the rest of its folder (answer_X-vs-answer_Y) first: round 0.
        for file in sorted(folder.glob("*.jsonl"), key=lambda f: (f.name.startswith("answer-"), f.name)):
            m = PAIR_FILE.match(file.name)
            if m is None or m["judge"] != judge:
                message = f"not a ratings-{judge} file name (answer_X-vs-answer_Y-{judge}-...)"
                problems.add(ImportProblem(file, None, None, message))
                continue
            pair = (m["x"], m["y"])
            seen[pair] = seen.get(pair, -1) + 1
            out.append((file, HUMAN_JUDGE if judge == "human" else LLM_JUDGES[judge], *pair, seen[pair]))
    for file in sorted((root / "qlora_vicuna" / "ratings-gpt4-pairwise").glob("*.jsonl")):
        m = QLORA_FILE.match(file.name)
        if m is None:
            message = "not a QLoRA GPT-4 ratings file name (X-vs-Y-gpt-4-reviewer-threeclass)"
            problems.add(ImportProblem(file, None, None, message))
            continue
        x, y = (QLORA_SYSTEMS.get(s) or s.removeprefix("answer-") for s in (m["x"], m["y"]))
        if x.startswith("guanaco") or y.startswith("guanaco"):  # the other pairs are PRD's own files
            out.append((file, LLM_JUDGES["gpt4"], x, y, 0))
    return out
