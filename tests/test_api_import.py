"""Importing a study through the API (JSON body, file upload, chen2024 zip) with the same checks
as `import_study`, and exporting one."""

import io
import json
import zipfile

import pytest
from django.urls import reverse

from annotations.models import ComparisonItem, Study
from annotations.study_files import study_export
from tests.test_study_import import CHEN, minimal_document, needs_chen

URL = "/api/v1/studies/"


def post_json(client, document, **params):
    url = URL + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")
    body = document if isinstance(document, str) else json.dumps(document, indent=2)
    return client.generic("POST", url, body, content_type="application/json")


def test_a_study_document_posted_as_json_is_imported(token_client):
    response = post_json(token_client, minimal_document())
    assert response.status_code == 201, response.content
    assert response.json()["slug"] == "mini"
    assert response["Location"] == reverse("api:study-detail", args=["mini"])
    study = Study.objects.get(slug="mini")
    groups = set(ComparisonItem.objects.filter(study=study).values_list("kind__slug", flat=True))
    assert groups == {None, "factual_error", "reference"}


def test_the_query_string_overrides_slug_title_and_status(token_client):
    response = post_json(token_client, minimal_document(), slug="other", title="Other", status="closed")
    assert response.status_code == 201, response.content
    study = Study.objects.get(slug="other")
    assert (study.title, study.status) == ("Other", "closed")


def test_a_bad_override_is_a_400_naming_it(token_client):
    response = post_json(token_client, minimal_document(), status="open")
    assert response.status_code == 400
    assert list(response.json()) == ["detail", "status"]
    assert not Study.objects.exists()


def test_an_invalid_document_is_refused_whole_naming_field_and_line(token_client):
    document = minimal_document()
    document["questions"][0]["answers"][2]["kind"] = "sarcasm"
    response = post_json(token_client, document)
    assert response.status_code == 400
    body = response.json()
    assert body["path"] == "request body"
    assert body["field"] == "questions[0].answers[2].kind"
    assert "unknown perturbation kind 'sarcasm'" in body["detail"]
    assert isinstance(body["line"], int) and body["line"] > 1
    assert not Study.objects.exists()


def test_broken_json_is_a_400_with_its_line(token_client):
    response = post_json(token_client, '{\n  "format": "biasstudy",\n  oops\n}')
    assert response.status_code == 400
    body = response.json()
    assert (body["path"], body["line"]) == ("request body", 3)
    assert "not valid JSON" in body["detail"]


@pytest.mark.parametrize("body", ["[]", "null", "42", '"text"'])
def test_json_that_is_not_an_object_is_a_400(token_client, body):
    response = post_json(token_client, body)
    assert response.status_code == 400
    assert response.json()["detail"]


def test_an_empty_body_is_a_400(token_client):
    response = token_client.generic("POST", URL, "", content_type="application/json")
    assert response.status_code == 400
    assert "empty" in response.json()["detail"]


def test_another_content_type_is_a_415(token_client):
    response = token_client.generic("POST", URL, "hello", content_type="text/plain")
    assert response.status_code == 415


def test_an_existing_slug_is_refused_and_nothing_is_written(token_client):
    assert post_json(token_client, minimal_document()).status_code == 201
    response = post_json(token_client, minimal_document(title="Again"))
    assert response.status_code == 400
    assert response.json()["field"] == "study.slug"
    assert Study.objects.get(slug="mini").title == "Mini"


@pytest.mark.parametrize(
    ("value", "message"), [(0, "at least 1"), (2**70, "too large to store"), (2**40, "less than or equal to")]
)
def test_a_value_the_database_would_refuse_is_a_400_naming_the_setting(token_client, value, message):
    # The file checks apply the model's own validators and constraints before anything is written.
    response = post_json(token_client, minimal_document(votes_per_item=value))
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert response.json()["field"] in ("study", "study.votes_per_item")
    assert not Study.objects.exists()


def test_a_study_file_can_be_uploaded_as_a_form(token_client):
    upload = io.BytesIO(json.dumps(minimal_document()).encode())
    upload.name = "my-study.json"
    response = token_client.post(URL, {"file": upload, "format": "biasstudy", "slug": "uploaded"}, format="multipart")
    assert response.status_code == 201, response.content
    assert Study.objects.filter(slug="uploaded").exists()


def test_errors_in_an_uploaded_file_name_the_file(token_client):
    document = minimal_document()
    document["questions"][0]["bloom"] = "guessing"
    upload = io.BytesIO(json.dumps(document, indent=2).encode())
    upload.name = "../../etc/my-study.json"
    response = token_client.post(URL, {"file": upload}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert (body["path"], body["field"]) == ("my-study.json", "questions[0].bloom")


def test_a_form_without_a_file_is_a_400(token_client):
    response = token_client.post(URL, {"format": "chen2024"}, format="multipart")
    assert response.status_code == 400
    assert list(response.json()) == ["detail", "file"]


def chen_rows(n: int = 2) -> tuple[list[dict], list[dict]]:
    raw, reference = [], []
    for i in range(n):
        a1, a2 = f"AAAAAAA{i}", f"BBBBBBB{i}"
        raw.append(
            {
                "question_id": f"Applying_{i}",
                "question": f"How do you solve 2*x={2 * i}?",
                "level": "Applying",
                "answers": {
                    "answer1": {"answer": "Divide both sides by 2.", "answer_id": a1},
                    "answer2": {"answer": "Halve the right-hand side.", "answer_id": a2},
                },
            }
        )
        reference.append(
            {
                "question_id": f"Applying_{i}-reference",
                "answers": {
                    "answer1": {"answer": "Divide both sides by 2 [1].", "answer_id": a1 + "wxyz", "perturb": True},
                    "answer2": {"answer": "Halve the right-hand side.", "answer_id": a2},
                },
            }
        )
    return raw, reference


def jsonl(rows: list[dict]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


def zipped(files: dict[str, str], name: str = "chen.zip") -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    buffer.seek(0)
    buffer.name = name
    return buffer


@pytest.mark.parametrize("folder", ["", "humans_llms_judgement_bias/"])
def test_a_chen2024_zip_is_imported_from_its_root_or_its_folder(token_client, folder):
    raw, reference = chen_rows()
    upload = zipped(
        {f"{folder}raw.json": jsonl(raw), f"{folder}reference.json": jsonl(reference), f"{folder}README.md": "x"}
    )
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 201, response.content
    study = Study.objects.get(slug="chen2024")
    assert study.items.control().count() == 2
    assert study.items.filter(kind__slug="reference").count() == 2


def test_errors_in_a_chen2024_zip_name_the_file_inside_and_its_line(token_client):
    raw, reference = chen_rows(3)
    reference[2]["answers"]["answer1"]["answer_id"] = "ZZZZZZZZwxyz"
    upload = zipped({"d/raw.json": jsonl(raw), "d/reference.json": jsonl(reference)})
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    # Named as the admin's upload names it: the zip, then the file inside its folder.
    assert (body["path"], body["line"], body["field"]) == ("chen.zip: reference.json", 3, "answers.answer1.answer_id")
    assert not Study.objects.exists()


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"../raw.json": "{}"}, "unexpected path"),  # every path refused: tests/test_security_zip_members.py
        ({"a/raw.json": "{}", "b/raw.json": "{}"}, "no raw.json"),
        ({"notes.txt": "x"}, "no raw.json"),
    ],
)
def test_a_chen2024_zip_with_unexpected_paths_is_refused(token_client, files, message):
    response = token_client.post(URL, {"file": zipped(files), "format": "chen2024"}, format="multipart")
    assert response.status_code == 400
    assert message in response.json()["detail"]


def test_chen2024_needs_a_zip(token_client):
    upload = io.BytesIO(b'{"question_id": "x"}\n')
    upload.name = "raw.json"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 400
    assert "zip" in response.json()["detail"]


@needs_chen
def test_the_published_chen2024_folder_imports_as_a_zip(token_client):
    upload = zipped({f"humans_llms_judgement_bias/{p.name}": p.read_text(encoding="utf-8") for p in CHEN.iterdir()})
    response = token_client.post(URL, {"file": upload, "format": "chen2024", "slug": "chen"}, format="multipart")
    assert response.status_code == 201, response.content
    assert Study.objects.get(slug="chen").questions.count() == 142


def test_an_upload_over_the_limit_is_a_413(token_client, settings):
    settings.API_IMPORT_MAX_MB = 0
    response = post_json(token_client, minimal_document())
    assert response.status_code == 413
    assert "API_IMPORT_MAX_MB" in response.json()["detail"]
    assert not Study.objects.exists()


def test_a_study_exports_as_its_document_and_imports_back(voted_study, token_client):
    study = voted_study.study
    response = token_client.get(reverse("api:study-export", args=[study.slug]))
    assert response.status_code == 200
    document = response.json()
    assert document == json.loads(json.dumps(study_export(study=study), default=str))
    assert post_json(token_client, document, slug="copy").status_code == 201
    copy = token_client.get(reverse("api:study-export", args=["copy"])).json()
    document["study"]["slug"] = "copy"
    assert copy == document


def test_a_study_that_lets_mturk_frame_it_is_imported_and_shown_so(token_client):
    response = post_json(token_client, minimal_document(allow_mturk_frame=True, fast_notice=True))
    assert response.status_code == 201, response.content
    assert (response.json()["allow_mturk_frame"], response.json()["fast_notice"]) == (True, True)
    shown = token_client.get(reverse("api:study-detail", args=["mini"])).json()
    assert (shown["allow_mturk_frame"], shown["fast_notice"], shown["per_rater_codes"]) == (True, True, False)
    exported = token_client.get(reverse("api:study-export", args=["mini"])).json()
    assert exported["study"]["allow_mturk_frame"] is True


def test_an_mturk_frame_setting_that_is_not_true_or_false_is_a_400_naming_it(token_client):
    response = post_json(token_client, minimal_document(allow_mturk_frame="on"))
    assert response.status_code == 400
    assert response.json()["field"] == "study.allow_mturk_frame"
    assert "must be true/false" in response.json()["detail"]
    assert not Study.objects.exists()


def test_a_large_study_is_imported_by_the_task_worker_as_the_admins_upload_is(
    token_client, settings, django_capture_on_commit_callbacks
):
    # Over the bound the admin's upload hands to the worker, the API does too (a 600-question
    # file held its request for 17-19 s): 202, then its state at the URL given.
    settings.STUDY_UPLOAD_BACKGROUND_QUESTIONS = 0
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(token_client, minimal_document())
    assert response.status_code == 202, response.content
    url = response.json()["url"]
    assert response["Location"] == url
    state = token_client.get(url).json()
    assert (state["state"], state["study"]) == ("done", "mini")
    assert Study.objects.get(slug="mini").questions.count() == 1


def test_a_large_study_with_a_problem_is_refused_at_once_and_nothing_is_queued(token_client, settings):
    settings.STUDY_UPLOAD_BACKGROUND_QUESTIONS = 0
    document = minimal_document()
    document["questions"][0]["bloom"] = "memorising"
    response = post_json(token_client, document)
    assert response.status_code == 400 and response.json()["field"] == "questions[0].bloom"
    assert not Study.objects.exists()


def test_an_unknown_import_token_is_a_404(token_client):
    assert token_client.get("/api/v1/study-imports/not-a-token/").status_code == 404
