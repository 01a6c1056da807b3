"""Line breaks of io/text_lines.py: \\n, \\r\\n and a lone \\r (old Mac files), as Python's text
mode reads them (open_text, every task and corpus reader), also across read blocks."""

import gzip
import io
import itertools

import pytest

from contextvec.io import text_lines
from contextvec.io.text_lines import open_text, read_lines, scan_lines


def _python_lines(data: bytes) -> list[str]:
    lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig").read().split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@pytest.mark.parametrize("data", [
    b"a b\rc d\r", b"a b\rc d", b"a b\r\nc d\r\n", b"a\r\rb\n", b"a\r\r\nb", b"\r", b"\n\n", b"",
    b"\xef\xbb\xbfa\rb", b"a\nb\rc\r\nd",
])
def test_lines_end_where_python_text_mode_ends_them(tmp_path, data):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    want = _python_lines(data)
    assert [text for _, text in read_lines(path)] == want
    assert scan_lines(path).n_lines == len(want)
    with open_text(path) as f:
        assert [line.rstrip("\n") for line in f] == want


def test_a_crlf_split_between_two_blocks_is_one_break(tmp_path, monkeypatch):
    monkeypatch.setattr(text_lines, "BLOCK", 3)
    for chars in itertools.product(b"a\r\n", repeat=6):
        data = bytes(chars)
        path = tmp_path / "in.txt"
        path.write_bytes(data)
        assert [text for _, text in read_lines(path)] == _python_lines(data), data


def test_cr_only_gzip_file(tmp_path):
    path = tmp_path / "in.txt.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"one two\rthree\r")
    assert list(read_lines(path)) == [(0, "one two"), (1, "three")]


def test_crlf_and_lf_files_hash_alike_and_cr_files_too(tmp_path):
    """A resume checks the input's hash: the same lines with any breaks are the same input."""
    hashes = set()
    for name, data in (("lf", b"a b\nc\n"), ("crlf", b"a b\r\nc\r\n"), ("cr", b"a b\rc\r")):
        (tmp_path / name).write_bytes(data)
        hashes.add(scan_lines(tmp_path / name).sha256)
    assert len(hashes) == 1


def test_an_empty_input_path_is_not_the_current_folder():
    for read in (scan_lines, lambda path: list(read_lines(path)), open_text):
        with pytest.raises(ValueError, match="the input path is empty; give a text file"):
            read("")
