"""The admin's "Import votes" page (the Study admin's action leads to it): the service behind
`import_votes` and the API, for staff only; a bad file is named with its line and field, and
nothing is written."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.models import Question, Study, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv

URL = reverse("analysis:votes-import")


def upload(tmp_path, rows=GOOD_ROWS, name="votes.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, write_csv(tmp_path / name, rows).read_bytes(), content_type="text/csv")


def test_the_study_action_opens_the_page_for_the_selected_study(staff_client):
    study = make_study(slug="there")
    changelist = reverse("admin:annotations_study_changelist")
    response = staff_client.post(changelist, {"action": "import_votes", "_selected_action": [study.pk]})
    assert response.status_code == 302 and response["Location"] == f"{URL}?study=there"
    page = staff_client.get(response["Location"]).content.decode()
    assert 'value="there"' in page and 'enctype="multipart/form-data"' in page


def test_staff_import_a_vote_file_and_land_on_the_study_s_dashboard(staff_client, tmp_path):
    study = make_study(slug="there")
    response = staff_client.post(URL, {"file": upload(tmp_path), "format": "csv", "study": "there"})
    assert response.status_code == 302
    assert response["Location"] == reverse("analysis:study", args=["there"])
    assert Vote.objects.filter(item__study=study).count() == 4


def test_create_makes_the_study(staff_client, tmp_path):
    data = {"file": upload(tmp_path), "format": "csv", "study": "new-one", "create": "on", "title": "New one"}
    assert staff_client.post(URL, data).status_code == 302
    assert Study.objects.get(slug="new-one").title == "New one"


def test_a_bad_file_is_named_with_its_line_and_field_and_nothing_is_written(staff_client, tmp_path):
    rows = [list(r) for r in GOOD_ROWS]
    rows[1][5] = "both"
    data = {"file": upload(tmp_path, rows, name="mine.csv"), "format": "csv", "study": "fresh", "create": "on"}
    response = staff_client.post(URL, data)
    assert response.status_code == 400
    errors = " ".join(response.context["form"].errors["file"])
    assert "nothing was imported" in errors and "mine.csv, line 3, field 'winner'" in errors
    assert not Study.objects.filter(slug="fresh").exists() and not Question.objects.exists()
    assert not Vote.objects.exists()


def test_an_unknown_study_without_create_is_refused(staff_client, tmp_path):
    response = staff_client.post(URL, {"file": upload(tmp_path), "format": "csv", "study": "nowhere"})
    assert response.status_code == 400 and "nowhere" in " ".join(response.context["form"].errors["study"])


def test_people_who_are_not_staff_are_sent_to_the_login(client, db, tmp_path):
    make_study(slug="there")
    response = client.post(URL, {"file": upload(tmp_path), "format": "csv", "study": "there"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Vote.objects.exists()
