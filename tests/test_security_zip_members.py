"""A chen2024 zip whose members are corrupt, encrypted, compressed with a method we do not read,
or declare a size that is not theirs is refused with a 400 naming the upload, never a 500; and
nothing is written."""

import io
import struct
import zipfile

import pytest

from annotations.models import Study
from tests.test_api_import import URL, chen_rows, jsonl

LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"


def archive(compression: int = zipfile.ZIP_STORED, *, questions: int = 40) -> bytearray:
    raw, reference = chen_rows(questions)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as zf:
        zf.writestr("raw.json", jsonl(raw))
        zf.writestr("reference.json", jsonl(reference))
    return bytearray(buffer.getvalue())


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
}


@pytest.mark.parametrize(("build", "message"), BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_member_is_a_400_naming_the_upload(token_client, build, message):
    upload = io.BytesIO(bytes(build()))
    upload.name = "chen.zip"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["path"] == "chen.zip"
    assert message in body["detail"]
    assert not Study.objects.exists()


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_the_same_archive_unbroken_imports_with_every_method_zipfile_reads(token_client, compression):
    upload = io.BytesIO(bytes(archive(compression)))
    upload.name = "chen.zip"
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 201, response.content
    assert Study.objects.get(slug="chen2024").questions.count() == 40
