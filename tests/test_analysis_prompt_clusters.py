"""A prompt that several systems answered is one cluster in every interval and test: the
questions of one prompt key (``Question.prompt_key``; the frame's ``cluster_id``) rise and fall
together, as the votes of 43 systems on one AlpacaEval instruction do. Checked by hand on a small
case, through the whole report, by simulation (prompts with a random effect, many studies: the
95% interval covers the truth about 95% of the time clustered by prompt, far less clustered by
(system, prompt)), and on the imported data sets, whose importers keep each prompt's key."""

import gzip
import json
import shutil

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from scipy.special import expit

from analysis import exports, lc, metrics, stats
from analysis.compute import analyze
from analysis.frame import by_judge
from analysis.rows import one, select
from analysis.simulate import votes_frame
from annotations.models import Question, Vote
from annotations.study_files import StudyFileError, study_export, study_import
from biasstudy.datasets import dataset_path
from tests.analysis_frames import frame, item, votes
from tests.factories import make_question, make_study
from vote_imports import importers, vote_import
from vote_imports.importers import prompt_key

DRAWS = 400
PROMPTS = 60
SYSTEMS = 8  # each answers every prompt against one baseline: a question per (system, prompt)
SPREAD = 1.0  # sd of the prompt effect on the log-odds, shared by every system's question


def mean_expit(mu: float, sd: float) -> float:
    """E[logistic(mu + sd·Z)], Z standard normal, by Gauss–Hermite quadrature."""
    x, w = np.polynomial.hermite.hermgauss(60)
    return float((w * expit(mu + sd * np.sqrt(2) * x)).sum() / np.sqrt(np.pi))


def hand_case() -> list[dict]:
    """Three prompts, two systems each (six questions, one vote each, shown A1 first): on prompt
    0 both systems' longer answers win, on prompt 1 one does, on prompt 2 neither."""
    rows = []
    for prompt in range(3):
        for system in range(2):
            q = 2 * prompt + system
            wins = prompt == 0 or (prompt == 1 and system == 0)
            it = item(q, q, "control", 2 * q, 2 * q + 1, len_a1=10, len_a2=30, cluster_id=100 + prompt)
            rows += votes(it, "a2" if wins else "a1", shown_first="a1")
    return rows


def test_a_prompt_shared_by_several_questions_is_one_cluster_by_hand():
    # Scores 1 1 | 1 0 | 0 0: p = 0.5. Per prompt, Σ(x − p) = 1, 0, −1, so CR1 = 3/2 × 2 / 6² =
    # 1/12 (above the votes' own 6 × 0.25 / 6² = 1/24): n_eff = 0.25 × 12 = 3, Wilson on 3.
    # As six clusters of one vote: CR1 = 6/5 × 1.5 / 6² = 1/20, n_eff = 5, Wilson on 5.
    by_prompt = metrics.verbosity(frame(hand_case()))
    assert (by_prompt["longer_wins"], by_prompt["n"], by_prompt["clusters"]) == (0.5, 6, 3)
    assert by_prompt["longer_wins_ci"] == pytest.approx(list(stats.wilson(1.5, 3)))
    each = metrics.verbosity(frame([{**r, "cluster_id": r["question_id"]} for r in hand_case()]))
    assert each["clusters"] == 6
    assert each["longer_wins_ci"] == pytest.approx(list(stats.wilson(2.5, 5)))


def test_every_figure_of_the_report_clusters_by_prompt():
    table = analyze(frame(hand_case()), study="s")["rows"]
    mine = select(table, judge="J")
    clustered = [r for r in mine if r["clusters"] is not None]
    assert {r["metric"] for r in clustered} >= {
        "position_first",
        "position_diff",
        "longer_wins",
        "raw_winrate",
        "lc_winrate",
        "items_tied",
    }
    assert {r["clusters"] for r in clustered} == {3}
    # The same votes as six questions of their own: narrower, six clusters.
    own = analyze(frame([{**r, "cluster_id": r["question_id"]} for r in hand_case()]), study="s")["rows"]
    for metric in ("longer_wins", "raw_winrate"):
        wide, narrow = one(table, judge="J", metric=metric), one(own, judge="J", metric=metric)
        assert wide["estimate"] == narrow["estimate"]
        assert narrow["clusters"] == 6
        assert wide["ci_hi"] - wide["ci_lo"] > narrow["ci_hi"] - narrow["ci_lo"]


def test_the_question_bootstrap_resamples_whole_prompts():
    # ASR over four prompts of two questions each; the two questions of a prompt always agree,
    # so resampling prompts gives the percentile interval of four units, questions of eight.
    rows = []
    for q in range(8):
        prompt, hit = q // 2, q // 2 < 2
        for group, choice in (("control", "a1"), ("reference", "a2" if hit else "a1")):
            it = item(10 * q + (group != "control"), q, group, 2 * q, 2 * q + 1, cluster_id=50 + prompt)
            rows += votes(it, choice)
    table = analyze(frame(rows), study="s", options=None)["rows"]
    asr = one(table, judge="J", metric="asr", group="reference", bloom="")
    assert (asr["estimate"], asr["n"], asr["clusters"]) == (0.5, 8, 4)
    own = analyze(frame([{**r, "cluster_id": r["question_id"]} for r in rows]), study="s")["rows"]
    narrow = one(own, judge="J", metric="asr", group="reference", bloom="")
    assert narrow["clusters"] == 8
    assert asr["ci_hi"] - asr["ci_lo"] > narrow["ci_hi"] - narrow["ci_lo"]


def simulated(seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """DRAWS studies (one judge each) of PROMPTS prompts that SYSTEMS systems answered against a
    baseline, one vote per (system, prompt) question. The judge takes the longer answer with
    probability logistic(0.3 + SPREAD·z_p) and the system's answer (A2) with probability
    logistic(0.3 + SPREAD·w_p), z_p and w_p drawn per prompt. Returns the frame and each
    question's A2 outcome (the win rate's y)."""
    rng = np.random.default_rng(seed)
    n_p = DRAWS * PROMPTS
    n_q = n_p * SYSTEMS
    prompt = np.repeat(np.arange(n_p), SYSTEMS)
    longer = rng.random(n_q) < expit(0.3 + SPREAD * rng.standard_normal(n_p))[prompt]
    a2_longer = rng.random(n_q) < 0.5
    items = pd.DataFrame(
        {
            "item_id": np.arange(n_q),
            "question_id": np.arange(n_q),
            "cluster_id": prompt,
            "group": "control",
            "semantics": "control",
            "a1_root": 2 * np.arange(n_q),
            "a2_root": 2 * np.arange(n_q) + 1,
            "len_a1_words": np.where(a2_longer, 50, 80),
            "len_a2_words": np.where(a2_longer, 80, 50),
            "bloom": "remembering",
        }
    )
    choice = np.where(longer == a2_longer, "a2", "a1")
    shown = np.where(choice == "a1", "first", "second")
    data = pd.DataFrame({"item_id": np.arange(n_q), "shown_first": "a1", "choice_shown": shown, "choice": choice})
    study = votes_frame(items, data.assign(client_ms=np.nan))
    study["judge"] = pd.Categorical(np.repeat(np.arange(DRAWS), PROMPTS * SYSTEMS).astype(str))
    wins = (rng.random(n_q) < expit(0.3 + SPREAD * rng.standard_normal(n_p))[prompt]).astype(float)
    return study, wins


def covered(intervals: np.ndarray, truth: float) -> float:
    return float(((intervals[:, 0] <= truth) & (truth <= intervals[:, 1])).mean())


def test_longer_wins_covers_its_truth_clustered_by_prompt_and_not_by_system_and_prompt():
    truth = mean_expit(0.3, SPREAD)
    studies = by_judge(simulated(seed=1)[0])
    by_prompt = [metrics.verbosity(v) for v in studies.values()]
    by_question = [metrics.verbosity(v.assign(cluster_id=v["question_id"])) for v in studies.values()]
    estimates = np.array([f["longer_wins"] for f in by_prompt])
    assert abs(estimates.mean() - truth) < 0.01
    assert {f["clusters"] for f in by_prompt} == {PROMPTS}
    coverage = covered(np.array([f["longer_wins_ci"] for f in by_prompt]), truth)
    assert 0.93 <= coverage <= 0.97, f"clustered by prompt: {coverage:.1%}"
    # As 480 independent questions: the interval is too narrow (eight systems per prompt here;
    # AlpacaEval's 43 on one instruction made it 2.7-2.9 times too narrow).
    coverage = covered(np.array([f["longer_wins_ci"] for f in by_question]), truth)
    assert coverage < 0.88, f"clustered by (system, prompt): {coverage:.1%}"


def test_the_raw_win_rate_covers_its_truth_clustered_by_prompt_and_not_by_system_and_prompt():
    truth = mean_expit(0.3, SPREAD)
    _, wins = simulated(seed=2)
    n = PROMPTS * SYSTEMS
    groups = np.full(n, "control")
    questions = np.arange(n)
    prompt = np.repeat(np.arange(PROMPTS), SYSTEMS)
    delta = np.random.default_rng(3).normal(0, 30, n)
    fits = {"prompt": [], "question": []}
    for d in range(DRAWS):
        y = wins[d * n : (d + 1) * n]
        for name, clusters in (("prompt", prompt), ("question", None)):
            fits[name].append(lc.fit(groups, questions, delta, y, np.ones(n), clusters=clusters, lambdas=(1.0,)))
    estimates = np.array([f.raw_winrate["control"] for f in fits["prompt"]])
    assert abs(estimates.mean() - truth) < 0.01
    assert {f.n_clusters["control"] for f in fits["prompt"]} == {PROMPTS}
    coverage = covered(np.array([f.raw_ci["control"] for f in fits["prompt"]]), truth)
    assert 0.93 <= coverage <= 0.97, f"clustered by prompt: {coverage:.1%}"
    coverage = covered(np.array([f.raw_ci["control"] for f in fits["question"]]), truth)
    assert coverage < 0.88, f"clustered by (system, prompt): {coverage:.1%}"


# --- the importers keep each prompt's key --------------------------------------------------


@pytest.mark.dataset("mtbench_human_judgments")
def test_mtbench_questions_keep_the_mtbench_question_id_as_their_prompt_key(db):
    study = make_study(status="draft", slug="mt")
    folder = dataset_path("mtbench_human_judgments")
    call_command("import_votes", str(folder / "gpt4_pair.csv"), "--format", "mtbench", "--study", "mt", verbosity=0)
    keys = dict(Question.objects.filter(study=study).values_list("external_id", "prompt_key"))
    assert keys and all(key == "mtbench-" + ext.split("-")[1] for ext, key in keys.items())
    # Both turns and every pair of models of one MT-bench question share it.
    of_81 = [ext for ext, key in keys.items() if key == "mtbench-81"]
    assert any("-t1-" in ext for ext in of_81) and any("-t2-" in ext for ext in of_81)
    assert len({ext.split("-", 3)[3] for ext in of_81}) > 2


@pytest.mark.dataset("prd_vicuna80_lfqa")
def test_prd_questions_keep_the_vicuna_question_id_as_their_prompt_key(db, tmp_path):
    source = dataset_path("prd_vicuna80_lfqa")
    for rel in [
        "vicuna80/prompts/vicuna_questions.jsonl",
        *(f"vicuna80/generations/answer_{s}.jsonl" for s in ("gpt4", "vicuna-13b", "claude")),
        "vicuna80/ratings-gpt4/answer_gpt4-vs-answer_vicuna-13b-gpt4-reviewer-threeclass.jsonl",
        "vicuna80/ratings-gpt4/answer_claude-vs-answer_gpt4-gpt4-reviewer_threeclass.jsonl",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / rel, tmp_path / rel)
    study = make_study(status="draft", slug="prd")
    call_command("import_votes", str(tmp_path), "--format", "prd", "--study", "prd", verbosity=0)
    keys = dict(Question.objects.filter(study=study).values_list("external_id", "prompt_key"))
    assert len(keys) == 2 * 80
    assert all(key == "prd-" + ext.split("-")[1] for ext, key in keys.items())
    assert keys["prd-7-gpt4-vs-vicuna-13b"] == keys["prd-7-claude-vs-gpt4"] == "prd-7"


@pytest.mark.dataset("alpaca_eval/annotations")
def test_alpaca_eval_questions_of_one_instruction_share_its_prompt_key(db, tmp_path):
    folder = dataset_path("alpaca_eval") / "annotations"
    files = sorted(folder.glob("*.json.gz"))[:2]
    study = make_study(status="draft", slug="ae")
    call_command("import_votes", *map(str, files), "--format", "alpaca_eval", "--study", "ae", verbosity=0)
    stored = list(Question.objects.filter(study=study).values_list("text", "subset", "prompt_key"))
    assert {key for text, _, key in stored} == {prompt_key(text) for text, _, _ in stored}
    assert all(key == prompt_key(text) for text, _, key in stored)
    # Every instruction both models answered is one key over two questions.
    instructions = {
        rec["instruction"] for rec in json.loads(gzip.decompress(files[0].read_bytes())) if rec.get("instruction")
    }
    per_key = pd.Series([key for _, _, key in stored]).value_counts()
    assert len(per_key) == len(instructions) and set(per_key) == {2}


@pytest.mark.dataset("llmbar")
def test_llmbar_instances_that_ask_the_same_input_share_its_prompt_key():
    parsed = importers.parse("llmbar", dataset_path("llmbar"), known_groups=set())
    questions = parsed.questions.values()
    assert all(q.prompt_key == prompt_key(q.text) for q in questions)
    # 1,200 instances ask 1,069 different inputs.
    assert (len(parsed.questions), len({q.prompt_key for q in questions})) == (1200, 1069)


def csv_rows(key: str) -> list[list[str]]:
    header = ["question_id", "question", "answer_a1", "answer_a2", "judge", "winner", "prompt_key"]
    return [
        header,
        ["q1", "Say hi.", "Hi.", "Hello!", "j", "a1", key],
        ["q2", "Say hi.", "Hey.", "Yo.", "j", "a2", key],
    ]


def test_a_vote_file_gives_each_question_its_prompt_key_and_a_different_one_is_refused(db, tmp_path):
    study = make_study(status="draft", slug="gen")
    path = tmp_path / "votes.csv"
    path.write_text("".join(exports.csv_lines(csv_rows("hi"))), encoding="utf-8")
    vote_import.votes_import_path(slug="gen", fmt="csv", path=path)
    assert dict(Question.objects.filter(study=study).values_list("external_id", "prompt_key")) == {
        "q1": "hi",
        "q2": "hi",
    }
    header, *rows = csv_rows("hello")
    votes = [header, *([*row[:4], "k", *row[5:]] for row in rows)]  # another judge, another key
    path.write_text("".join(exports.csv_lines(votes)), encoding="utf-8")
    with pytest.raises(importers.ImportProblem, match="'q1' is already in the study with prompt key 'hi', not 'hello'"):
        vote_import.votes_import_path(slug="gen", fmt="csv", path=path)
    assert Vote.objects.filter(item__study=study).count() == 2


def test_a_study_file_keeps_each_questions_prompt_key_and_refuses_one_that_is_not_text(db, tmp_path):
    study = make_study(status="draft", slug="keys")
    make_question(study, prompt_key="shared")
    make_question(study, prompt_key="shared")
    make_question(study)
    document = study_export(study=study)
    assert [q.get("prompt_key") for q in document["questions"]] == ["shared", "shared", None]
    path = tmp_path / "study.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    copy = study_import(path=path, fmt="biasstudy", slug="keys-copy")
    assert sorted(copy.questions.values_list("prompt_key", flat=True)) == ["", "shared", "shared"]
    document["questions"][0]["prompt_key"] = 7
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StudyFileError, match="prompt_key"):
        study_import(path=path, fmt="biasstudy", slug="keys-bad")
