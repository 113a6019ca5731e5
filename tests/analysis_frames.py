"""Build small votes frames by hand for the analysis tests (see analysis.frame for columns)."""

from __future__ import annotations

import itertools

import pandas as pd

from analysis.frame import COLUMNS, MEASURES, OPTIONAL_COLUMNS, normalise, probability_columns

_ids = itertools.count(1)


def item(item_id: int, question_id: int, group: str, a1_root: int, a2_root: int, **kw) -> dict:
    semantics = {"control": "control", "factual_error": "degrading"}.get(group, "non_semantic")
    row = {
        "item_id": item_id,
        "question_id": question_id,
        "question_ext": f"q{question_id}",
        "group": group,
        "semantics": kw.pop("semantics", semantics),
        "a1_root": a1_root,
        "a2_root": a2_root,
        "bloom": kw.pop("bloom", "remembering"),
        "is_gold": kw.pop("is_gold", False),
        "len_a1_words": kw.pop("len_a1", 50),
        "len_a2_words": kw.pop("len_a2", 50),
    }
    row.update(kw)
    return row


def votes(it: dict, choices: str, *, judge: str = "J", kind: str = "llm", **kw) -> list[dict]:
    """One vote per word of `choices` (a1 / a2 / tie), orders alternating A1 first, A2 first."""
    out = []
    for i, choice in enumerate(choices.split()):
        shown_first = kw.get("shown_first") or ("a1" if i % 2 == 0 else "a2")
        shown = "tie" if choice == "tie" else "first" if choice == shown_first else "second"
        row = {
            **it,
            "vote_id": next(_ids),
            "judge": judge,
            "judge_kind": kind,
            "choice": choice,
            "shown_first": shown_first,
            "choice_shown": shown,
        }
        row.update({k: v for k, v in kw.items() if k != "shown_first"})
        out.append(row)
    return out


def frame(rows: list[dict]) -> pd.DataFrame:
    defaults = {
        "rater": "",
        "rater_flagged": False,
        "run_id": float("nan"),
        "order_known": True,
        "not_familiar": False,
        "client_ms": float("nan"),
        "threshold_ms": 0.0,
        "words": 100,
        "received_at": pd.Timestamp("2025-01-01", tz="UTC"),
        "label_scheme": "",
        "labels_swapped": False,
        "question_ext": "q",
        "bloom": "remembering",
        "is_gold": False,
    }
    for m in MEASURES:
        for side in ("a1", "a2"):
            defaults[f"len_{side}_{m}"] = float("nan")
    records = [{**OPTIONAL_COLUMNS, **defaults, **r} for r in rows]
    # A row may give its option probabilities as the vote has them (a dict).
    probs = pd.Series([r.pop("option_probs", None) for r in records], dtype=object)
    columns = [*COLUMNS, *OPTIONAL_COLUMNS]
    df = pd.DataFrame.from_records(records, columns=columns) if records else pd.DataFrame(columns=COLUMNS)
    for col, values in probability_columns(probs).items():
        df[col] = values
    return normalise(df)
