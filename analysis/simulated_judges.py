"""Simulated judges and raters voting in a study, written as votes (``manage.py simulate``, the demo
study and tests): a simulated LLM judge (``judge_simulate``) and a human pool of simulated people
(``raters_simulate``). The simulator itself, with no database, is ``simulate.py``."""

from __future__ import annotations

import numpy as np
import pandas as pd
from django.db import transaction
from django.utils import timezone

from analysis import loader, simulate
from annotations.models import Judge, Rater, Study, Vote


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
        Study.objects.filter(pk=study.pk).data_changed()  # bulk_create sends no signal
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
        Study.objects.filter(pk=study.pk).data_changed()  # bulk_create sends no signal
    return len(sim)
