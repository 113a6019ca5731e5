"""Votes an import finds already in the study: recognised and left out, so that importing more
annotations of a judge the study has (a benchmark's new systems) adds what is new and never
doubles what is there (vote_imports.vote_import).

A vote is *the same vote* when the same judge (and rater, and round) gave it on the same
comparison: the same question and pair of answers, named

- by their content when the file gives the texts: the question's text and prompt key, the
  item's group, each answer's system and text. Two imports of AlpacaEval's files may number an
  instruction differently (``<model>#<n>`` counts instructions in the order of the files read),
  but its text, the systems and their answers are the same;
- else by the question's external id and the item's group (a file naming questions by id,
  like the votes export).

A file's vote is *recognised* when the study has such a vote with the same verdict (choice,
order shown and option probabilities); a vote the study has with another verdict is a problem
(nothing is written). The votes are counted as multisets: a key the file has k times and the
study j ≤ k times with those verdicts adds k − j.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from django.db.models import Count

from annotations.models import Answer, Study, Vote
from vote_imports import importers

# The probabilities are compared to this many decimals: what a JSON round trip keeps of them.
PROB_DECIMALS = 9


@dataclass
class Recognition:
    """The file's votes without those the study has (``parsed``), how many were recognised, the
    file's judges the study had votes of, and how many each had (checked again when the import
    writes)."""

    parsed: importers.Parsed
    recognised: int = 0
    judges: list[str] = field(default_factory=list)
    judge_votes: dict[str, int] = field(default_factory=dict)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _verdict(choice, shown_first, probs) -> tuple:
    rounded = tuple(sorted((k, round(float(v), PROB_DECIMALS)) for k, v in (probs or {}).items()))
    return (choice or None, shown_first or "a1", rounded)


def _parsed_key(parsed: importers.Parsed, vote: importers.VoteRecord) -> tuple:
    question = parsed.questions[vote.question]
    a1, a2 = (question.answers[a] for a in question.items[vote.group])
    who = (vote.judge, vote.rater or "", vote.round)
    if question.text is not None and a1.text is not None and a2.text is not None:
        content = (question.prompt_key or "", _digest(question.text), a1.system, _digest(a1.text))
        return (*who, "content", *content, vote.group, a2.system, _digest(a2.text))
    return (*who, "id", vote.question, vote.group)


def _study_keys(study: Study, judges: list[str]) -> dict[tuple, list[tuple]]:
    """Every vote of these judges in the study under both of its keys (content and id), with
    its verdict."""
    votes = list(
        Vote.objects.filter(item__study=study, judge__name__in=judges).values_list(
            "judge__name",
            "rater__participant_id",
            "round",
            "item__question__external_id",
            "item__question__prompt_key",
            "item__question__text",
            "item__kind__slug",
            "item__answer_a1_id",
            "item__answer_a2_id",
            "choice",
            "shown_first",
            "option_probs",
        )
    )
    answer_ids = {v[7] for v in votes} | {v[8] for v in votes}
    answers = {
        pk: (system, _digest(text))
        for pk, system, text in Answer.objects.filter(pk__in=answer_ids).values_list("pk", "system", "text")
    }
    keyed: dict[tuple, list[tuple]] = defaultdict(list)
    texts: dict[str, str] = {}
    for judge, rater, round_, ext, prompt_key, text, kind, a1, a2, choice, shown, probs in votes:
        who, group = (judge, rater or "", round_), kind or "control"
        verdict = _verdict(choice, shown, probs)
        digest = texts.setdefault(text, _digest(text))
        (s1, t1), (s2, t2) = answers[a1], answers[a2]
        keyed[(*who, "content", prompt_key, digest, s1, t1, group, s2, t2)].append(verdict)
        keyed[(*who, "id", ext, group)].append(verdict)
    return keyed


def votes_recognised(*, study: Study, parsed: importers.Parsed) -> Recognition:
    """Leave out of ``parsed`` the votes the study has (module docstring), and the questions
    only they needed. Raises ImportProblem for a vote the study has with another verdict."""
    judge_votes = _vote_counts(study, {v.judge for v in parsed.votes})
    judges = sorted(judge_votes)
    if not judges:
        return Recognition(parsed=parsed)
    keyed = _study_keys(study, judges)
    by_key: dict[tuple, list[importers.VoteRecord]] = defaultdict(list)
    kept = [v for v in parsed.votes if v.judge not in judges]
    for vote in parsed.votes:
        if vote.judge in judges:
            by_key[_parsed_key(parsed, vote)].append(vote)
    recognised = 0
    for key, votes in by_key.items():
        there = Counter(keyed.get(key, ()))
        given = Counter(_verdict(v.winner, v.shown_first, v.option_probs) for v in votes)
        if there - given:  # the study has a verdict the file does not give
            vote = votes[0]
            raise importers.ImportProblem(
                vote.meta.get("source", parsed.source),
                vote.meta.get("line", vote.meta.get("record")),
                "judge",
                f"{vote.judge!r} already voted on question {vote.question!r} ({vote.group}) in the study with "
                "another verdict: an import adds votes the study does not have and recognises those it has, "
                "it does not change them",
            )
        left = given - there
        for vote in votes:
            verdict = _verdict(vote.winner, vote.shown_first, vote.option_probs)
            if left[verdict] > 0:
                left[verdict] -= 1
                kept.append(vote)
            else:
                recognised += 1
    needed = {v.question for v in kept}
    questions = {ext: q for ext, q in parsed.questions.items() if ext in needed}
    return Recognition(
        parsed=replace(parsed, questions=questions, votes=kept),
        recognised=recognised,
        judges=judges,
        judge_votes=judge_votes,
    )


def votes_recognised_check(*, study: Study, recognition: Recognition, source: str) -> None:
    """Inside the import's transaction: raise ImportProblem when another import (or judge run)
    wrote votes of the file's judges since it was prepared, whose votes this one might double.
    One count per judge, not the keys again: it runs while the write lock is held."""
    judges = sorted({v.judge for v in recognition.parsed.votes} | set(recognition.judges))
    now = _vote_counts(study, judges)
    changed = [judge for judge in judges if now.get(judge, 0) != recognition.judge_votes.get(judge, 0)]
    if changed:
        raise importers.ImportProblem(
            source, None, "judge", f"study {study.slug!r} got votes of {', '.join(changed)} meanwhile"
        )


def _vote_counts(study: Study, judges) -> dict[str, int]:
    if study.pk is None:
        return {}
    rows = (
        Vote.objects.filter(item__study=study, judge__name__in=list(judges))
        .values("judge__name")
        .annotate(n=Count("pk"))
        .values_list("judge__name", "n")
    )
    return dict(rows)
