"""The analysis report reshaped into the rows the dashboard's tables show (the paper's Table 1
and Table 2 shapes). Pure functions over the report dict."""

from __future__ import annotations


def columns(result: dict) -> list[dict]:
    """Table 1 columns: ASR for every perturbation, accuracy for degrading ones; with a group
    filter, only the groups it keeps (the others would be columns of n/a, a study of the whole
    catalogue has over ten)."""
    kept = set(result.get("filters", {}).get("groups") or [])
    cols = []
    for g in result["groups"]:
        if kept and g["group"] not in kept:
            continue
        cols.append({"group": g["group"], "metric": "asr", "label": f"ASR {g['group']}", "better": "lower"})
        if g["semantics"] == "degrading":
            cols.append({"group": g["group"], "metric": "accuracy", "label": f"Acc {g['group']}", "better": "higher"})
    return cols


def table1(result: dict, part: str | None = None) -> dict:
    """Rows of judges (then the random judge) with value, interval, n and rank per column.
    ``part`` selects a Bloom level's breakdown instead of the whole study."""
    cols = columns(result)
    rows = []
    for judge in result["judges"]:
        source = judge if part is None else judge["by_bloom"].get(part)
        if source is None:
            continue
        cells = []
        for c in cols:
            rate = source["asr" if c["metric"] == "asr" else "accuracy"].get(
                c["group"], {"value": None, "ci": [None, None], "n": 0}
            )
            rank = judge["ranks"][c["metric"]].get(c["group"]) if part is None else None
            cells.append({**rate, "lo": rate["ci"][0], "hi": rate["ci"][1], "rank": rank})
        # A Bloom level's votes, not the judge's total: its counted votes with a choice.
        n_votes = judge["n_votes"] if part is None else source["position"]["n"]
        rows.append(
            {
                "judge": judge["judge"],
                "kind": judge["kind"],
                "n_votes": n_votes,
                "cells": cells,
                # The whole study's: a judge voting by position ties a lot, and ASR counts a tie as robust.
                "ties": _tie_cell(judge.get("tie_share")) if part is None else None,
                "position_dominated": judge.get("position_dominated") or [],
            }
        )
    rnd = result["random_judge"]
    cells = [
        {**rnd["asr" if c["metric"] == "asr" else "accuracy"][c["group"]], "lo": None, "hi": None, "rank": None}
        for c in cols
    ]
    rows.append({"judge": "random judge", "kind": "chance level", "n_votes": None, "cells": cells, "chance": True})
    return {"columns": cols, "rows": rows, "with_ties": part is None}


def _tie_cell(ties: dict | None) -> dict | None:
    """A tie share as a table cell (value, lo, hi, n), or None where the report has none."""
    if not ties:
        return None
    return {**ties, "lo": ties["ci"][0], "hi": ties["ci"][1], "rank": None}


def table2(result: dict) -> list[dict]:
    rows = [{"judge": j["judge"], "kind": j["kind"], **j["position"]} for j in result["judges"]]
    rows.append({"judge": "Human-NF", "kind": "not familiar", **result["human_nf_position"]})
    rows.append({"judge": "random judge", "kind": "chance level", **result["random_judge"]["position"], "chance": True})
    return rows


def label_rows(result: dict) -> list[dict]:
    """One row per (judge, label scheme) of the position-and-label table: the conditional
    position and label effects where the label order varied within items, else ``split``
    False and the reason (people, older runs: the two cannot be told apart, and the position
    alone is in the positional table)."""
    rows = []
    for judge in result["judges"]:
        found = judge.get("label_and_position")
        if not found:
            continue
        for scheme, label in found["label"].items():
            rows.append(
                {
                    "judge": judge["judge"],
                    "labels": f"{label['first_label']} / {label['second_label']}" if label["first_label"] else scheme,
                    "split": label["identifiable"],
                    "position": found["position"] if label["identifiable"] else None,
                    "label": label if label["identifiable"] else None,
                    "reason": label.get("reason"),
                    "n": found["n"],
                    "n_ties": found["n_ties"],
                }
            )
    return rows


def lc_rows(result: dict) -> list[dict]:
    """One row per (judge, group): raw and length-controlled win rates and effects, each with
    its interval (lo/hi keys beside the value), the length slope and the questions behind it."""
    rows = []
    for judge in result["judges"]:
        for g in judge["lc_winrate"]:
            row = {
                "judge": judge["judge"],
                "group": g,
                "slope": judge["length_slope"].get(g),
                "n": judge["lc_n"].get(g),
            }
            for name, key in (
                ("raw", "raw_winrate"),
                ("lc", "lc_winrate"),
                ("raw_effect", "raw_effect"),
                ("lc_effect", "lc_effect"),
            ):
                lo, hi = judge[f"{key}_ci"].get(g, (None, None))
                row.update({name: judge[key].get(g), f"{name}_lo": lo, f"{name}_hi": hi})
            rows.append(row)
    return rows


def consistency_rows(result: dict) -> tuple[list[dict], list[dict]]:
    """Judges with order-swapped pairs or gold labels, overall and by subset: (rows, subset
    rows), each {judge, subset, consistency, primacy, recency, first_share, fairness,
    both_unread, gold (the gold_accuracy part)}. Judges the data says nothing about are left out."""
    rows, subset_rows = [], []
    for judge in result["judges"]:
        pc, gold = judge["position_consistency"], judge["gold_accuracy"]
        if not pc["consistency"]["n"] and not gold["a1_first"]["n"] and not gold["a2_first"]["n"]:
            continue
        rows.append(
            {"judge": judge["judge"], "subset": "", **pc, "gold": gold, "stability": judge["repetition_stability"]}
        )
        for subset in sorted(set(pc["by_subset"]) | set(gold["by_subset"])):
            subset_rows.append(
                {
                    "judge": judge["judge"],
                    "subset": subset,
                    **pc["by_subset"].get(subset, {}),
                    "gold": gold["by_subset"].get(subset, {}),
                }
            )
    return rows, subset_rows
