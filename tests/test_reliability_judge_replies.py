"""Bad model replies, one mode per item, in one run against the scriptable server on loopback:
a reply whose vote cannot be read becomes a `failed` vote whose error says what was wrong; a
reply whose vote can be read but whose token counts or log-probabilities are garbage (or shaped
wrong) is kept as an `ok` vote without them, its error saying what was dropped; characters no
database stores (NUL, lone surrogates) in the text or in a log-probability's token are replaced
by U+FFFD, and the vote says so. The run finishes with every good vote stored, and retry-failed
asks again for exactly the failed ones. The server misbehaves only for the first tries of each
prompt (the run's attempt, and its one retry where the failure is transient), so retry-failed
gets good replies. PostgreSQL refuses more than SQLite does (a NUL in jsonb): run this module on
both (DATABASE_URL)."""

import json

import pytest

from annotations.models import Vote
from judges.models import CachedResponse, JudgeRun
from judges.services import judge_run_execute, judge_run_resume, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

VOTES_PER_ITEM = 2
TRANSIENT = {"malformed", "drop", "cutbody"}
# directive -> what the stored error of a failed vote must say (None: the vote is stored as ok)
MODES = {
    "": None,
    "nul": None,
    "nanlogprob": None,
    "inflogprob": None,
    "hugelogprob": None,
    "strlogprob": None,
    "negtokens": None,
    "hugetokens": None,
    "strtokens": None,
    "suptokens": None,
    "digittokens": None,
    "longtokens": None,
    "listlogprobs": None,
    "textlogprobs": None,
    "nultoken": None,
    "surrogatetoken": None,
    "surrogate": None,
    "megabyte": "characters",
    "nulerror": "HTTP 400",
    "malformed": "malformed response",
    "drop": "gave up",
    "cutbody": "gave up",
}

# A vote kept without the garbage beside it: what its error says was dropped.
KEPT_WITHOUT = {
    "nanlogprob": "log-probabilit",
    "inflogprob": "log-probabilit",
    "hugelogprob": "log-probabilit",
    "strlogprob": "log-probabilit",
    "negtokens": "tokens_in",
    "hugetokens": "tokens_in",
    "strtokens": "tokens_in",
    "suptokens": "tokens_in",
    "digittokens": "tokens_in",
    "longtokens": "tokens_in",
    "listlogprobs": "log-probabilities are not readable",
    "textlogprobs": "log-probabilities are not readable",
    # Cleaned, not dropped: the option probabilities are still read from the tokens.
    "nultoken": "no database stores (NUL, lone surrogate) of its log-probabilities' tokens",
    "surrogatetoken": "no database stores (NUL, lone surrogate) of its log-probabilities' tokens",
    "nul": "1 character no database stores (NUL, lone surrogate) of its text",
    "surrogate": "1 character no database stores (NUL, lone surrogate) of its text",
}


@pytest.mark.slow
def test_each_bad_reply_fails_only_its_own_vote_and_retry_failed_asks_only_for_those(db):
    study = make_study(slug="bad-replies")
    for mode in MODES:
        # Transient failures (no usable body) are retried once within the run; bad content is not.
        tries = 2 if mode in TRANSIENT else 1
        directive = f"[[do:{mode}x{tries}]]" if mode else ""
        make_question(study, text=f"Question {mode or 'plain'}?", a1=f"GOOD answer {directive}", a2="Plain answer.")
        # A good item between bad ones: ten failures in a row would trip the runner's breaker
        # (a backend that is down), which is not what this test is about.
        make_question(study, text=f"Between {mode}?", a1="GOOD answer.", a2="Plain answer.")
    with JudgeServer() as server:
        config = make_llm_judge(
            base_url=server.base_url, concurrency=2, votes_per_item=VOTES_PER_ITEM, max_retries=1,
            retry_base_seconds=0.01, invalid_retries=0, timeout=5, logprobs=True, prompt_style="vote_only",
        )  # fmt: skip
        run = judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)
        assert run.status == JudgeRun.Status.DONE, run.error
        votes = {mode: list(run.votes.filter(item__question__text=f"Question {mode or 'plain'}?")) for mode in MODES}
        assert run.votes.count() == 2 * len(MODES) * VOTES_PER_ITEM
        for mode, expected in MODES.items():
            for vote in votes[mode]:
                if expected is None:
                    assert (vote.parse_status, vote.choice) == (Vote.Parse.OK, "a1"), (mode, vote.error)
                    dropped = KEPT_WITHOUT.get(mode)
                    assert (dropped in vote.error) if dropped else not vote.error, (mode, vote.error)
                    if dropped and "log-probabilit" in dropped and "tokens" not in dropped:
                        assert vote.option_probs is None
                    elif dropped and "tokens (each" in vote.error:
                        assert set(vote.option_probs) == {"first", "second", "tie"}
                    if dropped == "tokens_in":
                        assert vote.meta["tokens_in"] == 0
                else:
                    assert vote.parse_status == Vote.Parse.FAILED and expected in vote.error, (mode, vote.error)
        for mode in ("nul", "surrogate"):
            assert votes[mode][0].raw_output.startswith("Answer1\ufffd"), votes[mode][0].raw_output
        cached = CachedResponse.objects.filter(text__startswith="Answer1").exclude(logprobs=None)
        assert any("Answer\ufffd" in json.dumps(entry.logprobs, ensure_ascii=False) for entry in cached)
        assert all("\x00" not in vote.error for vote in votes["nulerror"])
        kept = {vote.pk: vote.received_at for vote in run.votes.filter(parse_status=Vote.Parse.OK)}

        asked = len(server.log)
        run = judge_run_resume(run=run, retry_failed=True, enqueue=False)
        run = judge_run_execute(run_id=run.pk)
        assert run.status == JudgeRun.Status.DONE
        failed_modes = {mode for mode, expected in MODES.items() if expected}
        retried = {entry["prompt"].split("[[do:")[1].split("x")[0] for entry in server.log[asked:]}
        assert retried == failed_modes
        assert len(server.log) - asked == len(failed_modes) * VOTES_PER_ITEM
        assert run.votes.count() == 2 * len(MODES) * VOTES_PER_ITEM
        assert set(run.votes.values_list("parse_status", flat=True)) == {Vote.Parse.OK}
        assert {v.pk: v.received_at for v in run.votes.filter(pk__in=kept)} == kept


def test_replies_with_garbage_beside_the_vote_keep_every_vote_and_do_not_stop_the_run(db):
    # 18 items x 4 votes, every reply with a bad usage, bad or badly shaped log-probabilities,
    # or a character no database stores: many more than the runner's breaker (10 failures in a
    # row) allows, had these been failures, and any write the database refused would fail the run.
    study = make_study(slug="garbage-beside")
    modes = (list(KEPT_WITHOUT) * 2)[:18]
    for n, mode in enumerate(modes):
        make_question(study, text=f"Question {n}?", a1=f"GOOD answer [[do:{mode}]]", a2="Plain answer.")
    with JudgeServer() as server:
        config = make_llm_judge(
            base_url=server.base_url, concurrency=2, votes_per_item=4, max_retries=0, invalid_retries=0,
            timeout=5, logprobs=True, prompt_style="vote_only",
        )  # fmt: skip
        run = judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)
        assert len(server.log) == 72
    assert run.status == JudgeRun.Status.DONE, run.error
    votes = list(run.votes.select_related("item__question"))
    assert len(votes) == 72
    assert {(vote.parse_status, vote.choice) for vote in votes} == {(Vote.Parse.OK, "a1")}
    for vote in votes:
        mode = modes[int(vote.item.question.text.split()[1].rstrip("?"))]
        assert vote.error.startswith("vote kept; dropped from the reply:"), (mode, vote.error)
        assert KEPT_WITHOUT[mode] in vote.error, (mode, vote.error)
    assert run.progress()["failed"] == 0
