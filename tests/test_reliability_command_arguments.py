"""Every management command we ship exits non-zero with a clear message on bad arguments, and
writes nothing. A new command without an entry in BAD_ARGUMENTS fails the first test."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import CommandError

from annotations.models import Study
from tests.factories import make_llm_judge, make_question, make_study
from tests.live import live_env, manage
from tests.test_study_import import minimal_document

OUR_APPS = {"annotations", "perturbations", "judges", "vote_imports", "analysis", "api", "prolific", "biasstudy"}

# command -> [(arguments, a fragment the message must contain)]
BAD_ARGUMENTS: dict[str, list[tuple[list[str], str]]] = {
    "ensure_staff": [(["--username", ""], "--username"), (["--username", "a b/c"], "--username"), (["--bogus"], "unrecognized")],
    "export_study": [([], "--study"), (["--study", "nope"], "no study with slug 'nope'"),
                     (["--study", "cmd", "-o", "/nonexistent-dir/x.json"], "cannot write")],
    "import_study": [([], "path"), (["x.json"], "--format"), (["x.json", "--format", "csv"], "invalid choice"),
                     (["/nonexistent.json", "--format", "biasstudy"], "no such file"),
                     (["{doc}", "--format", "biasstudy", "--status", "bogus"], "status"),
                     (["{doc}", "--format", "biasstudy", "--slug", "cmd"], "exists already"),
                     (["{doc}", "--format", "chen2024"], "folder")],
    "load_demo": [(["--bogus"], "unrecognized")],
    "create_demo_judges": [(["extra"], "unrecognized")],
    "run_judge": [([], "--study"), (["--study", "nope", "--judge", "j"], "no study"),
                  (["--study", "cmd", "--judge", "nope"], "no LLM judge"),
                  (["--study", "cmd", "--judge", "cmd-judge", "--votes-per-item", "0"], "at least 1"),
                  (["--study", "cmd", "--judge", "cmd-judge", "--votes-per-item", "many"], "invalid int"),
                  (["--study", "cmd", "--judge", "cmd-judge", "--retry-failed"], "--resume"),
                  (["--study", "cmd", "--judge", "cmd-judge", "--resume"], "no run")],
    "perturb": [([], "--study"), (["--study", "nope", "--kind", "reference"], "no study"),
                (["--study", "cmd", "--kind", "nope"], "nope"), (["--study", "cmd", "--kind", "reference", "--of", "a3"], "invalid choice"),
                (["--study", "cmd", "--kind", "reference", "--seed", "x"], "invalid int")],
    "analyze": [([], "--study"), (["--study", "nope"], "no study with slug 'nope'"),
                (["--study", "cmd", "--min-ms", "abc"], "invalid int")],
    "export_votes": [([], "--study"), (["--study", "nope", "-o", "x.csv"], "no study with slug 'nope'")],
    "export_items": [([], "--study"), (["--study", "nope", "-o", "x.csv"], "no study with slug 'nope'")],
    "export_metrics": [([], "--study"), (["--study", "nope", "-o", "x.csv"], "no study with slug 'nope'")],
    "import_votes": [([], "path"), (["x.csv", "--format", "yaml", "--study", "cmd"], "invalid choice"),
                     (["x.csv", "--format", "csv", "--study", "nope"], "x.csv: no such file or folder")],
    "simulate": [([], "--study"), (["--study", "nope"], "no study with slug 'nope'"),
                 (["--study", "cmd", "--tie-rate", "2"], "--tie-rate")],
    "lc_alpaca_constants": [([], "annotations"), (["x.json", "--leaderboard", "y.csv", "--folds", "many"], "invalid int")],
    "metrics_doc": [(["--bogus"], "unrecognized arguments")],
    "prolific_sync": [(["--study", "nope"], "the study 'nope' has no Prolific study")],
}  # fmt: skip


def _ours() -> set[str]:
    return {name for name, app in get_commands().items() if app.split(".")[-1] in OUR_APPS}


def test_every_command_of_ours_has_bad_arguments_to_try():
    assert _ours() == set(BAD_ARGUMENTS), "add the new command's bad arguments to BAD_ARGUMENTS"


@pytest.fixture
def world(db, tmp_path):
    study = make_study(slug="cmd")
    make_question(study)
    make_llm_judge(name="cmd-judge", base_url="http://127.0.0.1:9/v1")
    document = tmp_path / "doc.json"
    document.write_text(json.dumps(minimal_document(slug="fresh")))
    return document


def _cases():
    return [pytest.param(command, args, fragment, id=f"{command}-{i}") for command in sorted(BAD_ARGUMENTS)
            for i, (args, fragment) in enumerate(BAD_ARGUMENTS[command])]  # fmt: skip


@pytest.mark.parametrize(("command", "args", "fragment"), _cases())
def test_bad_arguments_raise_a_command_error_naming_the_problem_and_write_nothing(world, command, args, fragment):
    args = [str(world) if arg == "{doc}" else arg for arg in args]
    studies, users = Study.objects.count(), get_user_model().objects.count()
    with pytest.raises(CommandError) as error:
        call_command(command, *args, verbosity=0)
    assert fragment in str(error.value)
    assert Study.objects.count() == studies and get_user_model().objects.count() == users


def test_from_the_shell_a_bad_argument_is_a_non_zero_exit_with_the_message_on_stderr(tmp_path):
    env = live_env(f"sqlite:///{tmp_path / 'cmd.sqlite3'}")
    done = manage("run_judge", "--study", "cmd", "--judge", "x", "--votes-per-item", "many", env=env)
    assert done.returncode != 0
    assert "--votes-per-item: invalid int value: 'many'" in done.stderr
    done = manage("import_study", str(tmp_path / "missing.json"), "--format", "biasstudy", env=env)
    assert done.returncode == 1
    assert "CommandError: import failed, nothing was written" in done.stderr and "no such file" in done.stderr
