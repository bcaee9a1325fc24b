"""The importer tests' shared copies (tests/parse_helpers.py) are what they say: a cut
keeps 1 to one short of the whole file's bytes, in the encoding asked for; a UTF-16 copy
carries its byte-order mark and reads back as the original."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.parse_helpers import encoded_copy, random_cut

TEXT = "# nccl-tests\n       8  2  float  sum  -1  6.8  0.00  0.00  0\n"


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["utf-8", "utf-16", "utf-16-le"]), st.data())
def test_a_random_cut_keeps_a_proper_prefix(encoding: str, data: st.DataObject) -> None:
    whole = TEXT.encode(encoding)
    with random_cut(data, TEXT, encoding, "log.txt") as (path, kept):
        assert path.name == "log.txt" and path.read_bytes() == kept
        assert 1 <= len(kept) < len(whole) and whole.startswith(kept)
    assert not path.exists()  # gone with its directory


def test_an_encoded_copy_reads_back_as_the_original(tmp_path: Path) -> None:
    source = tmp_path / "orig.txt"
    source.write_text(TEXT)
    copy = encoded_copy(tmp_path / ".", source, name="u16.txt", newline="\r\n")
    assert copy.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")  # a byte-order mark
    assert copy.read_bytes().decode("utf-16") == TEXT.replace("\n", "\r\n")
    plain = encoded_copy(tmp_path, TEXT, "utf-16-le")
    assert plain.name == "copy.txt" and plain.read_bytes() == TEXT.encode("utf-16-le")
