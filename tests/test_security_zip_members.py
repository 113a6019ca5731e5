"""One routine unpacks every zip we are sent (annotations.archives.archive_unpack): its limits are
tested here once, on the function; the two entry points that use it (the API's study import and
the admin's upload) are then shown to answer its refusals as theirs, a 400 (or 413) naming the
upload, or the admin's message, with nothing written or kept."""

import io
import struct
import zipfile

import pytest

from annotations import uploads
from annotations.archives import ArchiveError, ArchiveLimits, ArchiveTooLarge, archive_unpack
from annotations.models import Study
from tests.test_admin_study_upload import post_file
from tests.test_api_import import URL, chen_rows, jsonl

LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"
LIMITS = ArchiveLimits(total_bytes=1_000_000)


def archive(compression: int = zipfile.ZIP_STORED, *, questions: int = 40) -> bytearray:
    raw, reference = chen_rows(questions)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as zf:
        zf.writestr("raw.json", jsonl(raw))
        zf.writestr("reference.json", jsonl(reference))
    return bytearray(buffer.getvalue())


def zipped(files: dict[str, bytes | str], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def patch(data: bytearray, local_offset: int, central_offset: int, fmt: str, value: int) -> bytearray:
    """Write `value` into the first member's local header and its central directory entry."""
    struct.pack_into(fmt, data, data.index(LOCAL) + local_offset, value)
    struct.pack_into(fmt, data, data.index(CENTRAL) + central_offset, value)
    return data


def corrupt_deflate() -> bytearray:
    data = archive(zipfile.ZIP_DEFLATED)
    start = data.index(LOCAL) + 30 + len("raw.json")
    for i in range(start + 2, start + 40):
        data[i] ^= 0x5A
    return data


def flipped_stored_byte() -> bytearray:
    data = archive()
    data[data.index(LOCAL) + 30 + len("raw.json") + 5] ^= 0x01  # the CRC no longer matches
    return data


BROKEN = {
    "corrupt deflate stream": (corrupt_deflate, "corrupt"),
    "a flipped byte": (flipped_stored_byte, "corrupt"),
    "encrypted": (lambda: patch(archive(), 6, 8, "<H", 0x1), "encrypted"),
    "deflate64": (lambda: patch(archive(), 8, 10, "<H", 9), "compression method"),
    "unknown method 99": (lambda: patch(archive(), 8, 10, "<H", 99), "compression method"),
    "declares fewer bytes": (lambda: patch(archive(), 22, 24, "<I", 10), "corrupt"),
    "declares more bytes": (lambda: patch(archive(), 22, 24, "<I", 9_000), "corrupt"),
    "declares a smaller compressed size": (lambda: patch(archive(), 18, 20, "<I", 10), "corrupt"),
    "not a zip at all": (lambda: bytearray(b"PK\x03\x04 not really a zip"), "not a zip archive"),
}


def unpack(tmp_path, data: bytes, limits: ArchiveLimits = LIMITS, **kw) -> list:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "upload.zip"
    path.write_bytes(data)
    return archive_unpack(archive=path, target=tmp_path / "out", limits=limits, **kw)


# --------------------------------------------------------------------------- the function


@pytest.mark.parametrize(("build", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_archive_is_refused_saying_what_is_wrong(tmp_path, build, message):
    with pytest.raises(ArchiveError, match=message):
        unpack(tmp_path, bytes(build()))


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_every_method_zipfile_reads_unpacks_to_the_same_bytes(tmp_path, compression):
    files = {"raw.json": '{"a": 1}\n' * 500, "d/reference.json": "[]"}
    written = unpack(tmp_path, zipped(files, compression))
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == ["raw.json", "d/reference.json"]
    assert (tmp_path / "out" / "raw.json").read_text() == files["raw.json"]


def test_only_members_with_the_wanted_suffixes_are_written_and_macos_metadata_is_skipped(tmp_path):
    files = {"votes.csv": "a,b\n", "notes.txt": "x", "raw.json": "{}", "__MACOSX/._votes.csv": "junk", "d/": ""}
    written = unpack(tmp_path, zipped(files), suffixes=(".csv",))
    assert written == [tmp_path / "out" / "votes.csv"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["votes.csv"]


def test_more_members_than_allowed_are_refused_before_anything_is_written(tmp_path):
    files = {f"{n}.json": "{}" for n in range(4)}
    with pytest.raises(ArchiveError, match="more than 3 files in the archive"):
        unpack(tmp_path, zipped(files), ArchiveLimits(total_bytes=1000, members=3))
    assert not (tmp_path / "out").exists()
    assert len(unpack(tmp_path, zipped(files), ArchiveLimits(total_bytes=1000, members=4))) == 4


def test_files_declaring_more_than_the_limit_in_total_are_refused(tmp_path):
    files = {"a.json": b" " * 600, "b.json": b" " * 600, "ignored.txt": b" " * 5000}
    with pytest.raises(ArchiveTooLarge, match="larger than the limit") as refused:
        unpack(tmp_path, zipped(files), ArchiveLimits(total_bytes=1199))
    assert refused.value.limit == 1199
    assert not (tmp_path / "out").exists()
    assert len(unpack(tmp_path, zipped(files), ArchiveLimits(total_bytes=1200))) == 2  # the .txt is not counted


def test_a_bomb_whose_declared_size_lies_is_stopped(tmp_path):
    """Ten million spaces declared as ten bytes: zipfile stops at the declared size and the CRC
    check refuses the member; what was written stays within the declared size."""
    data = bytearray(zipped({"raw.json": b" " * 10_000_000}, zipfile.ZIP_DEFLATED))
    assert len(data) < 100_000
    patch(data, 22, 24, "<I", 10)
    with pytest.raises(ArchiveError, match="corrupt"):
        unpack(tmp_path, bytes(data), ArchiveLimits(total_bytes=1000))
    assert sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file()) <= 10


@pytest.mark.parametrize(
    "name", ["../raw.json", "/raw.json", "a/../../raw.json", "a/b/raw.json", "..\\raw.json", "C:/raw.json"]
)
def test_a_path_that_leaves_the_folder_or_goes_too_deep_is_refused(tmp_path, name):
    with pytest.raises(ArchiveError, match="unexpected path"):
        unpack(tmp_path / "deep" / "er", zipped({"ok.json": "{}", name: "{}"}))
    assert not list(tmp_path.rglob("raw.json"))


def test_the_depth_allowed_is_the_callers(tmp_path):
    with pytest.raises(ArchiveError, match="unexpected path 'a/raw.json'"):
        unpack(tmp_path, zipped({"a/raw.json": "{}"}), ArchiveLimits(total_bytes=100, depth=1))
    assert unpack(tmp_path, zipped({"a/b/raw.json": "{}"}), ArchiveLimits(total_bytes=100, depth=3))


# --------------------------------------------------------------------------- the entry points


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    return settings.STUDY_UPLOAD_DIR


@pytest.mark.parametrize(("build", "message"), [BROKEN["encrypted"], BROKEN["deflate64"], BROKEN["a flipped byte"]])
def test_the_api_answers_a_refused_archive_with_a_400_naming_the_upload(token_client, build, message):
    upload = io.BytesIO(bytes(build()))
    upload.name = "chen.zip"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["path"] == "chen.zip"
    assert message in body["detail"]
    assert not Study.objects.exists()


def test_the_api_answers_a_too_large_archive_with_a_413(token_client, settings):
    settings.API_IMPORT_MAX_MB = 1
    upload = io.BytesIO(zipped({"raw.json": b" " * 2_000_000}, zipfile.ZIP_DEFLATED))
    upload.name = "chen.zip"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 413
    assert not Study.objects.exists()


def test_the_api_imports_an_unbroken_archive(token_client):
    upload = io.BytesIO(bytes(archive(zipfile.ZIP_DEFLATED)))
    upload.name = "chen.zip"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 201, response.content
    assert Study.objects.get(slug="chen2024").questions.count() == 40


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda: patch(archive(), 6, 8, "<H", 0x1), "encrypted"),
        (lambda: zipped({"raw.json": "", "../../escaped.json": "{}"}), "unexpected path"),
        (lambda: zipped({f"{n}.json": "{}" for n in range(201)}), "more than 200 files"),
    ],
    ids=["encrypted", "path", "members"],
)
def test_the_admin_upload_shows_the_refusal_and_keeps_nothing(staff_client, upload_dir, data, message):
    response = post_file(staff_client, "chen.zip", bytes(data()))
    assert message in response.content.decode()
    assert list(upload_dir.iterdir()) == []


def test_the_admin_upload_keeps_the_folder_holding_raw_json_as_the_upload(db, upload_dir):
    raw, reference = chen_rows(3)
    data = zipped({"d/raw.json": jsonl(raw), "d/reference.json": jsonl(reference), "d/README.md": "x"})
    upload = uploads.study_upload_store(name="chen.zip", chunks=[data])
    assert sorted(p.name for p in upload.path.iterdir()) == ["raw.json", "reference.json"]
    assert sorted(p.name for p in upload.folder.iterdir()) == [uploads.CHEN_FOLDER]
