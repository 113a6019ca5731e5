"""Analysis workflows over the database: analyse a study, simulate judges, import votes.
Views, commands and the admin call these; the maths lives in plain modules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from analysis import importers, loader, report, results_cache, simulate
from analysis.frame import Filters
from annotations.models import ComparisonItem, Judge, PerturbationKind, Rater, Slot, Study, Vote
from biasstudy import bulk


def study_groups(*, study: Study) -> tuple[list[str], dict[str, str]]:
    """The study's perturbation groups (from its items, voted on or not) and their semantics."""
    kind_ids = ComparisonItem.objects.filter(study=study, kind__isnull=False).values_list("kind_id", flat=True)
    kinds = PerturbationKind.objects.filter(id__in=kind_ids).values_list("slug", "semantics")
    semantics = dict(kinds)
    return sorted(semantics), semantics


def study_subsets(*, study: Study) -> list[str]:
    """The subsets the study's questions come from (imported data sets such as LLMBar), sorted."""
    named = study.questions.exclude(subset="").values_list("subset", flat=True)
    return sorted(set(named))


def study_runs(*, study: Study) -> list[int]:
    """Ids of the study's LLM judge runs (what the "runs" filter may pick)."""
    from judges.models import JudgeRun

    return list(JudgeRun.objects.filter(study=study).order_by("id").values_list("id", flat=True))


def kind_slugs(*, study: Study) -> set[str]:
    """Perturbation kinds usable in the study: the built-in ones and its own."""
    return set(PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study=study)).values_list("slug", flat=True))


def scheme_labels() -> dict[str, tuple[str, str]]:
    """The judges app's label schemes as (first label, second label); empty before it has them."""
    try:
        from judges.prompts import LABEL_SCHEMES
    except ImportError:  # the judges app defines its schemes in judges.prompts
        return {}
    return {slug: (scheme.first, scheme.second) for slug, scheme in LABEL_SCHEMES.items()}


def _with_scheme_labels(options: report.Options | None) -> report.Options:
    options = options or report.Options()
    if not options.scheme_labels:
        options.scheme_labels = scheme_labels()
    return options


def study_analyze(*, study: Study, filters: Filters | None = None, options: report.Options | None = None) -> dict:
    """The study's report, from the cache while nothing it reads has changed (results_cache)."""
    filters = filters or Filters()
    options = _with_scheme_labels(options)

    def compute() -> dict:
        groups, semantics = study_groups(study=study)
        return report.analyze(
            loader.study_frame(study),
            study=study.slug,
            filters=filters,
            options=options,
            votes_per_item=study.votes_per_item,
            groups=groups,
            semantics=semantics,
        )

    return results_cache.cached(study, filters, options, compute)


def study_figure(
    *, study: Study, name: str, fmt: str, filters: Filters | None = None, options: report.Options | None = None
) -> bytes:
    """One dashboard figure of the study's report as SVG or PNG bytes, cached as the report is:
    a page's refresh with nothing new draws nothing again."""
    from analysis import plots  # matplotlib: loaded by the figure views, not by every command

    filters = filters or Filters()
    options = _with_scheme_labels(options)

    def draw() -> bytes:
        result = study_analyze(study=study, filters=filters, options=options)
        return plots.render(plots.draw(name, result)[0], fmt)

    return results_cache.cached(study, filters, options, draw, part=f"figure:{name}.{fmt}")


def judge_simulate(
    *, study: Study, name: str, params: simulate.JudgeParams, votes_per_item: int | None = None, seed: int = 0
) -> tuple[Judge, int]:
    """Create (or reuse) a simulated judge with ``params`` and let it vote on every scored item
    of ``study``, ``votes_per_item`` times each, balanced over orders. Returns (judge, votes)."""
    k = votes_per_item or study.votes_per_item
    items = loader.study_items(study)
    items = items[~items["is_gold"]]
    # A simulated LLM judge: label order counterbalanced against display order, as in a real run.
    sim = simulate.simulate_votes(items, params, votes_per_item=k, seed=seed, counterbalance_labels=True)
    with transaction.atomic():
        judge, _ = Judge.objects.update_or_create(
            name=name, study=None, defaults={"kind": Judge.Kind.SIMULATED, "params": params.as_dict()}
        )
        start = (
            Vote.objects.filter(judge=judge, item__study=study)
            .order_by("-round")
            .values_list("round", flat=True)
            .first()
        )
        offset = 0 if start is None else start + 1
        Vote.objects.bulk_create(
            [
                Vote(
                    item_id=int(r.item_id),
                    judge=judge,
                    round=int(r.round) + offset,
                    shown_first=r.shown_first,
                    label_scheme=r.label_scheme,
                    labels_swapped=bool(r.labels_swapped),
                    choice_shown=r.choice_shown,
                    choice=r.choice,
                    meta={"simulated": True, "seed": seed},
                )
                for r in sim.itertuples(index=False)
            ],
            batch_size=2000,
        )
    return judge, len(sim)


def raters_simulate(
    *,
    study: Study,
    raters: int,
    params: simulate.JudgeParams,
    votes_per_item: int | None = None,
    seed: int = 0,
    flag_share: float = 0.0,
    not_familiar_rate: float = 0.03,
) -> int:
    """Fill the study's human pool with simulated people (demo data and the rater monitor):
    ``raters`` raters with pseudonymous ids SIM-0001…, each item voted by distinct raters.
    Returns the number of votes written."""
    k = votes_per_item or study.votes_per_item
    if params.label:
        raise ValueError("people see the answers left and right, under no labels: a label bias is for a judge")
    if raters < k:
        raise ValueError(f"need at least {k} raters for {k} votes per item (a rater votes once per item)")
    items = loader.study_items(study)
    items = items[~items["is_gold"]]
    params = simulate.JudgeParams(**{**params.as_dict(), "median_ms": params.median_ms or 9000})
    sim = simulate.simulate_votes(items, params, votes_per_item=k, seed=seed)
    rng = np.random.default_rng(seed + 1)
    # Each item's k votes go to k different raters.
    per_item = np.argsort(rng.random((len(items), raters)), axis=1)[:, :k].ravel()
    now = timezone.now()
    spread = pd.to_timedelta(rng.uniform(0, 3 * 24 * 3600, len(sim)), unit="s")
    nf = rng.random(len(sim)) < not_familiar_rate
    with transaction.atomic():
        pool, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
        people = []
        for i in range(raters):
            pid = f"SIM-{seed:02d}-{i + 1:04d}"
            flagged = i < round(raters * flag_share)
            rater, _ = Rater.objects.get_or_create(
                study=study,
                participant_id=pid,
                defaults={
                    "target": study.target_per_rater,
                    "flagged": flagged,
                    "flag_reason": "simulated careless rater" if flagged else "",
                    "gold_seen": 5,
                    "gold_correct": 2 if flagged else 5,
                },
            )
            people.append(rater)
        Vote.objects.bulk_create(
            [
                Vote(
                    item_id=int(r.item_id),
                    judge=pool,
                    rater=people[int(who)],
                    shown_first=r.shown_first,
                    choice_shown=None if is_nf and j % 2 else r.choice_shown,
                    choice=None if is_nf and j % 2 else r.choice,
                    not_familiar=bool(is_nf),
                    client_ms=int(r.client_ms),
                    server_ms=int(r.client_ms) + 400,
                    received_at=now - delay,
                    parse_status=Vote.Parse.OK,
                )
                for j, (r, who, is_nf, delay) in enumerate(
                    zip(sim.itertuples(index=False), per_item, nf, spread, strict=True)
                )
            ],
            batch_size=2000,
        )
    return len(sim)


RATER_STATUSES = ("finished", "partial", "failed attention checks")
GOLD_FLAG = "attention checks"  # how annotations.assignment begins the flag reason it writes


def rater_status(rater: Rater) -> str:
    """finished (shown their completion code), failed attention checks (flagged for them), or
    partial (left, or still working, before the end)."""
    if rater.flagged and rater.flag_reason.startswith(GOLD_FLAG):
        return "failed attention checks"
    return "finished" if rater.finished_at else "partial"


# A finished rater with more than this share of their votes too fast (faster than the study's
# threshold: they cannot have read both answers) is suggested for review, not approval. Their
# too-fast votes counted toward their target, as every answer does (annotations.completion).
TOO_FAST_REVIEW_SHARE = Fraction(1, 3)


def suggested_action(rater: Rater, status: str, votes: int, too_fast: int) -> tuple[str, str]:
    """What to do with the rater's submission on the platform, and why: reject who failed the
    attention checks, approve who finished, unless flagged by hand or too fast too often; the
    rest (left before the end) is for a person to review."""
    if status == "failed attention checks":
        return "reject", "failed the attention checks"
    if status != "finished":
        return "review", "did not finish"
    if rater.flagged:
        return "review", f"flagged: {rater.flag_reason}" if rater.flag_reason else "flagged"
    if too_fast > votes * TOO_FAST_REVIEW_SHARE:
        return "review", f"{too_fast} of {votes} votes too fast"
    return "approve", ""


def raters_monitor(*, study: Study) -> list[dict]:
    """Per rater: votes (counted, too fast, not familiar), median response time, share of left
    choices, tie rate, attention-check accuracy, flags, completion status and total time (entry
    to completion code, or to the last vote for those who have not finished), and the suggested
    action for payment with its reason (`suggested_action`), so careless raters can be replaced
    in time and everyone paid right."""
    columns = ["rater_id", "client_ms", "choice_shown", "not_familiar", "meta"]
    votes = pd.DataFrame(
        list(Vote.objects.filter(item__study=study, rater__isnull=False).values_list(*columns)), columns=columns
    )
    stats_by_rater = {}
    if len(votes):
        votes["client_ms"] = votes["client_ms"].astype(float)
        assignment = votes["meta"].map(lambda m: (m or {}).get("assignment", {}))
        votes["too_fast"] = assignment.map(lambda a: bool(a.get("too_fast", False)))
        votes["counted"] = assignment.map(lambda a: bool(a.get("counted", False)))
        grouped = votes.groupby("rater_id")
        decided = votes[votes["choice_shown"].notna()]
        stats_by_rater = {
            rid: {
                "votes": int(len(g)),
                "counted": int(g["counted"].sum()),
                "too_fast": int(g["too_fast"].sum()),
                "not_familiar_votes": int(g["not_familiar"].sum()),
                "median_ms": None if g["client_ms"].isna().all() else float(g["client_ms"].median()),
                "not_familiar": float(g["not_familiar"].mean()),
            }
            for rid, g in grouped
        }
        for rid, g in decided.groupby("rater_id"):
            shown = g["choice_shown"]
            stats_by_rater[rid]["left"] = float((shown == "first").mean())
            stats_by_rater[rid]["tie"] = float((shown == "tie").mean())
    rows = []
    for rater in Rater.objects.filter(study=study).order_by("participant_id"):
        s = stats_by_rater.get(rater.id, {})
        end = rater.finished_at or rater.last_seen_at
        status = rater_status(rater)
        action, because = suggested_action(rater, status, s.get("votes", 0), s.get("too_fast", 0))
        rows.append(
            {
                "rater": rater,
                "votes": s.get("votes", 0),
                "counted": s.get("counted", 0),
                "too_fast": s.get("too_fast", 0),
                "not_familiar_votes": s.get("not_familiar_votes", 0),
                "median_ms": s.get("median_ms"),
                "left": s.get("left"),
                "tie": s.get("tie"),
                "not_familiar": s.get("not_familiar"),
                "gold": rater.gold_correct / rater.gold_seen if rater.gold_seen else None,
                "below_gold": bool(rater.gold_seen) and rater.gold_correct / rater.gold_seen < study.gold_min_accuracy,
                "status": status,
                "action": action,
                "action_because": because,
                "total_seconds": round((end - rater.created_at).total_seconds()) if end else None,
            }
        )
    return rows


def power_table(
    *, n_questions: int, raters: int, items_per_rater: int, susceptibility: float, noise: float, tie_rate: float
) -> dict:
    """Interval widths of ASR for several votes-per-item, including what the given raters
    supply (raters × items per rater spread over the questions' items). The width falls as
    votes per item grow, towards what the number of questions allows (simulate.asr_interval_widths)."""
    groups = len(simulate.SYNTHETIC_GROUPS) + 1
    supplied = max(1, (raters * items_per_rater) // (n_questions * groups))
    ks = sorted({1, 2, 4, 6, 8, 12, supplied})
    params = simulate.JudgeParams(
        tie_rate=tie_rate,
        noise=noise,
        susceptibility={"reference": susceptibility, "rich_content": susceptibility, "factual_error": -susceptibility},
    )
    rows = simulate.asr_interval_widths(n_questions=n_questions, votes_per_item=ks, params=params)
    return {"rows": rows, "supplied": supplied, "groups": list(simulate.SYNTHETIC_GROUPS)}


class StudyNotFound(ValueError):
    """No study by that slug, and none may be made (or the slug cannot name one)."""


def study_for_votes(*, slug: str, create: bool = False, title: str | None = None) -> Study:
    """The study votes are imported into; with ``create``, a new draft study when there is none
    by that slug. Call it inside the import's transaction: a failed import then leaves no empty
    study behind."""
    try:
        return Study.objects.get(slug=slug)
    except Study.DoesNotExist:
        if not create:
            raise _no_study(slug) from None
    study = Study(slug=slug, title=title or slug)
    try:
        study.full_clean()
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
        raise StudyNotFound(f"cannot create study {slug!r}: {problems}") from None
    study.save()
    return study


def study_for_votes_check(*, slug: str, create: bool = False) -> None:
    """Raise StudyNotFound now, before an upload waits for the task worker, when the import
    could not find its study. (A study made by ``create`` is checked when it is made.)"""
    if not create and not Study.objects.filter(slug=slug).exists():
        raise _no_study(slug)


def _no_study(slug: str) -> StudyNotFound:
    return StudyNotFound(f"no study with slug {slug!r} (add --create to make it; create=true in the API)")


# What an import does, in order: `progress` is called with each step's index as it begins.
VOTES_IMPORT_STEPS = ("reading the votes", "writing questions, answers and items", "writing votes")


def votes_import_path(
    *,
    slug: str,
    fmt: str,
    path: Path,
    create: bool = False,
    title: str | None = None,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[Study, dict[str, int]]:
    """Import the vote file (or data-set folder) at ``path`` in format ``fmt`` (importers.FORMATS)
    into the study ``slug``, made first with ``create``: what ``import_votes`` and the task
    worker (for the admin page and the API) call. One transaction: when it raises
    (ImportProblem, StudyNotFound) nothing is written, not even the study it would have made.
    ``progress(step)`` is told each of VOTES_IMPORT_STEPS as it begins."""
    progress = progress or (lambda step: None)
    with transaction.atomic():
        study = study_for_votes(slug=slug, create=create, title=title)
        progress(0)
        parsed = importers.parse(fmt, path, known_groups=kind_slugs(study=study), limit=limit)
        return study, votes_import(study=study, parsed=parsed, progress=progress)


# What the admin page and the API take as an upload (analysis/uploads.py): a `csv` file, or a
# folder format (MT-bench, PRD, LLMBar) as a zip of its folder. The zip's data sits at its top or
# in its single folder, whichever holds the file or folder named here (every copy of the data set
# has it).
ZIPPED_FOLDERS = {"mtbench": "question.jsonl", "prd": "vicuna80", "llmbar": "evaluator_votes.csv.gz"}
UPLOAD_FORMATS = ("csv", *ZIPPED_FOLDERS)
# Sized for the real folders zipped, with room: PRD is 234 files, 20 MB unpacked, four levels deep
# counting its own folder (prd/vicuna80/ratings-gpt4/….jsonl); LLMBar 2 MB. The bytes are the
# upload's limit (API_IMPORT_MAX_MB), and only the files the formats read are unpacked.
ZIP_MEMBERS, ZIP_DEPTH = 1000, 4
ZIP_SUFFIXES = (".csv", ".csv.gz", ".json", ".jsonl")


def votes_import(
    *, study: Study, parsed: importers.Parsed, progress: Callable[[int], None] | None = None
) -> dict[str, int]:
    """Write parsed votes as the study's rows: questions, original (and variant) answers, items,
    one imported judge per judge name, raters, votes. All in one transaction: a problem found
    while writing leaves nothing behind. Questions already in the study are reused when they
    match (so human and model votes on the same pairs can come from separate files).
    ``progress`` is told steps 1 and 2 of VOTES_IMPORT_STEPS as they begin."""
    progress = progress or (lambda step: None)
    from annotations.models import Answer, Question, choice_from_shown

    kinds = {k.slug: k for k in PerturbationKind.objects.all()}
    counts = {"questions": 0, "answers": 0, "items": 0, "judges": 0, "raters": 0, "votes": 0, "repeats_unlinked": 0}
    with transaction.atomic():
        progress(1)
        judge_names = sorted({v.judge for v in parsed.votes})
        taken = set(
            Vote.objects.filter(item__study=study, judge__name__in=judge_names).values_list("judge__name", flat=True)
        )
        if taken:
            raise importers.ImportProblem(
                parsed.source, None, "judge", f"study {study.slug!r} already has votes of {', '.join(sorted(taken))}"
            )
        existing = {
            q.external_id: q for q in Question.objects.filter(study=study, external_id__in=list(parsed.questions))
        }
        new_questions = []
        for ext, rec in parsed.questions.items():
            if ext in existing:
                if existing[ext].text != rec.text:
                    raise importers.ImportProblem(
                        parsed.source, None, "question", f"question {ext!r} is already in the study with another text"
                    )
            else:
                new_questions.append(
                    Question(study=study, external_id=ext, text=rec.text, bloom_level=rec.bloom, subset=rec.subset)
                )
        Question.objects.bulk_create(new_questions, batch_size=1000)
        counts["questions"] = len(new_questions)
        questions = {
            q.external_id: q for q in Question.objects.filter(study=study, external_id__in=list(parsed.questions))
        }

        answers = {(a.question_id, a.external_id): a for a in Answer.objects.filter(question__in=questions.values())}
        measured: dict[str, Answer] = {}
        for originals_pass in (True, False):
            batch = []
            for ext, rec in parsed.questions.items():
                q = questions[ext]
                for a in rec.answers.values():
                    if (a.derived_from is None) != originals_pass:
                        continue
                    known = answers.get((q.id, a.external_id))
                    if known is not None:
                        if known.text != a.text:
                            raise importers.ImportProblem(
                                parsed.source,
                                None,
                                "answer",
                                f"answer {a.external_id!r} is already in the study with another text",
                            )
                        continue
                    answer = Answer(
                        question=q,
                        external_id=a.external_id,
                        text=a.text,
                        system=a.system,
                        provenance={"method": "import", "source": parsed.source},
                    )
                    if a.derived_from:
                        answer.derived_from = answers[(q.id, a.derived_from)]
                        answer.kind = kinds[_group_of(rec, a.external_id)]
                    # bulk_create skips save(), which caches the lengths; a text seen before (PRD
                    # repeats each system's answer on every pair) is measured once.
                    if a.lengths is not None:  # no text, its lengths given instead
                        answer.len_words, answer.len_chars = a.lengths.get("words", 0), a.lengths.get("chars", 0)
                        answer.len_bpe = a.lengths.get("bpe")
                    elif (same := measured.setdefault(a.text, answer)) is answer:
                        answer.refresh_lengths()
                    else:
                        answer.len_words, answer.len_chars, answer.len_bpe = (
                            same.len_words,
                            same.len_chars,
                            same.len_bpe,
                        )
                    batch.append(answer)
            Answer.objects.bulk_create(batch, batch_size=1000)
            counts["answers"] += len(batch)
            answers.update({(a.question_id, a.external_id): a for a in batch})

        items = {
            (i.question_id, i.kind.slug if i.kind_id else "control"): i
            for i in ComparisonItem.objects.filter(study=study, question__in=questions.values()).select_related("kind")
        }
        new_items = []
        for ext, rec in parsed.questions.items():
            q = questions[ext]
            for group, (a1, a2) in rec.items.items():
                known = items.get((q.id, group))
                a1_obj, a2_obj = answers[(q.id, a1)], answers[(q.id, a2)]
                if known is not None:
                    if (known.answer_a1_id, known.answer_a2_id) != (a1_obj.id, a2_obj.id):
                        raise importers.ImportProblem(
                            parsed.source,
                            None,
                            "group",
                            f"question {ext!r} already has a {group} item with other answers",
                        )
                    continue
                item = ComparisonItem(
                    study=study,
                    question=q,
                    kind=None if group == "control" else kinds[group],
                    answer_a1=a1_obj,
                    answer_a2=a2_obj,
                    gold_label=rec.gold.get(group, ""),
                )
                new_items.append(item)
        ComparisonItem.objects.bulk_create(new_items, batch_size=1000)
        Slot.objects.sync(study, items=new_items)  # bulk_create skips save(), which makes them
        counts["items"] = len(new_items)
        items.update({(i.question_id, i.kind.slug if i.kind_id else "control"): i for i in new_items})

        judges = {}
        for name in judge_names:
            judge, created = Judge.objects.get_or_create(
                study=study,
                name=name,
                defaults={
                    "kind": Judge.Kind.IMPORTED,
                    "params": {"source": parsed.source, **({"people": True} if name in parsed.people else {})},
                },
            )
            judges[name] = judge
            counts["judges"] += int(created)
        rater_votes: dict[str, int] = {}
        for v in parsed.votes:
            if v.rater:
                rater_votes[v.rater] = rater_votes.get(v.rater, 0) + 1
        raters = {r.participant_id: r for r in Rater.objects.filter(study=study, participant_id__in=list(rater_votes))}
        new_raters = [
            Rater(study=study, participant_id=pid, target=n, source=Rater.Source.DIRECT)
            for pid, n in rater_votes.items()
            if pid not in raters
        ]
        Rater.objects.bulk_create(new_raters, batch_size=1000)
        counts["raters"] = len(new_raters)
        raters.update(
            {r.participant_id: r for r in Rater.objects.filter(study=study, participant_id__in=list(rater_votes))}
        )

        progress(2)
        seen: set[tuple[int, int]] = set()
        # A rater id met again in a later file is the same rater: one vote per item still holds.
        earlier = set(
            Vote.objects.filter(rater__in=list(raters.values()), item__study=study).values_list("rater_id", "item_id")
        )
        batch = []
        now = timezone.now()
        for v in parsed.votes:
            item = items[(questions[v.question].id, v.group)]
            if v.rater and (raters[v.rater].id, item.id) in earlier:
                raise importers.ImportProblem(
                    v.meta.get("source", parsed.source),
                    v.meta.get("line"),
                    "rater",
                    f"rater {v.rater!r} already voted on this item (question {v.question!r}, {v.group}) in the "
                    "study, from another file or the rater pages; one vote per rater and item",
                )
            shown_first = v.shown_first or "a1"
            choice_shown = "tie" if v.winner == "tie" else ("first" if v.winner == shown_first else "second")
            if v.winner is None:  # the source could not read a verdict: kept, with no choice
                choice_shown = None
            meta = dict(v.meta)
            if v.shown_first is None:
                meta["order_known"] = False
            rater = raters.get(v.rater) if v.rater else None
            if rater is not None:
                if (rater.id, item.id) in seen:
                    meta.update(rater=v.rater, repeat_of_same_rater=True)
                    counts["repeats_unlinked"] += 1
                    rater = None
                else:
                    seen.add((rater.id, item.id))
            batch.append(
                {
                    "item_id": item.id,
                    "judge_id": judges[v.judge].id,
                    "rater_id": rater.id if rater is not None else None,
                    "round": v.round,
                    "label_scheme": v.label_scheme,
                    "option_probs": v.option_probs,
                    "shown_first": shown_first,
                    "choice_shown": choice_shown,
                    "choice": choice_from_shown(shown_first, choice_shown) if choice_shown else None,
                    "parse_status": Vote.Parse.OK if choice_shown else Vote.Parse.INVALID,
                    "not_familiar": v.not_familiar,
                    "client_ms": v.response_ms,
                    "meta": meta,
                    "received_at": now,
                }
            )
        # Rows, not model instances: Vote.save() does nothing for a vote whose choice is set.
        bulk.insert_rows(Vote, batch)
        counts["votes"] = len(batch)
        linked = Counter(vote["rater_id"] for vote in batch if vote["rater_id"] is not None)
        for rater in raters.values():
            rater.votes_done += linked[rater.pk]
        Rater.objects.bulk_update([r for r in raters.values() if linked[r.pk]], ["votes_done"], batch_size=1000)
    return counts


def _group_of(rec: importers.QuestionRecord, answer_external_id: str) -> str:
    for group, (_, a2) in rec.items.items():
        if a2 == answer_external_id:
            return group
    raise importers.ImportProblem("", None, "group", f"answer {answer_external_id!r} is in no item")
