"""Files of documents (contextvec.io.documents): blank lines and CoNLL's -DOCSTART- lines separate
documents, read as every text file is (gzip, byte-order mark, CRLF, invalid UTF-8), streamed."""

from __future__ import annotations

import gzip
import os
import threading

import pytest

from contextvec.io.documents import iter_documents, read_documents
from contextvec.io.text_lines import InputError

DOCUMENTS = [["The cat sat .", "It slept ."], ["A second one ."], ["Third , with  two spaces .", "x"]]


def _write(tmp_path, text: str | bytes, name: str = "docs.txt"):
    path = tmp_path / name
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def test_blank_lines_separate_documents_and_make_none_of_their_own(tmp_path):
    text = ("\n  \nThe cat sat .\nIt slept .\n\nA second one .\n \t\n\n\n"
            "Third , with  two spaces .\nx\n\n\n")
    assert read_documents(_write(tmp_path, text)) == DOCUMENTS


def test_docstart_lines_separate_documents_as_conll_writes_them(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\nThe cat sat .\nIt slept .\n\n-DOCSTART- -X- -X- O\n\n"
            "A second one .\n-DOCSTART-\nThird , with  two spaces .\nx\n-DOCSTART- -X- O\n")
    assert read_documents(_write(tmp_path, text)) == DOCUMENTS
    # a line that only starts like the separator is a sentence
    assert read_documents(_write(tmp_path, "-DOCSTARTED here\n-DOCSTART-x\n")) == [
        ["-DOCSTARTED here", "-DOCSTART-x"]]


@pytest.mark.parametrize("name,encode", [
    ("docs.txt.gz", lambda text: text.encode()),
    ("docs.txt", lambda text: b"\xef\xbb\xbf" + text.encode()),  # a byte-order mark
    ("docs.txt", lambda text: text.replace("\n", "\r\n").encode()),
    ("docs.txt", lambda text: text.replace("\n", "\r").encode()),
])
def test_gzip_byte_order_marks_and_line_breaks_read_as_plain_text(tmp_path, name, encode):
    text = "The cat sat .\nIt slept .\n\nA second one .\n\n\nThird , with  two spaces .\nx\n\n"
    assert read_documents(_write(tmp_path, encode(text), name)) == DOCUMENTS


@pytest.mark.parametrize("text", ["", "\n\n", " \r\n-DOCSTART- -X- -X- O\n\n-DOCSTART-\n"])
def test_a_file_without_a_document_is_one_line_naming_it(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=f"^{path} holds no document: it is empty or only blank and "
                                         "-DOCSTART- lines$"):
        read_documents(path)


def test_invalid_utf8_is_refused_by_line_or_replaced(tmp_path):
    path = _write(tmp_path, b"ok .\n\nbad \xff .\nfine .\n")
    with pytest.raises(InputError, match=r"1 line\(s\) that are not valid UTF-8 at line\(s\) 3 "):
        iter_documents(path)  # checked before the first document comes out
    assert read_documents(path, invalid_utf8="replace") == [["ok ."], ["bad \ufffd .", "fine ."]]
    with pytest.raises(ValueError, match="invalid_utf8 must be one of error, replace, not 'skip'"):
        read_documents(path, invalid_utf8="skip")


def test_documents_stream_out_before_the_file_is_read_to_its_end(tmp_path):
    # more than one read block of text before a damaged end: the first documents come out,
    # then the damage is named; nothing waits for (or holds) the whole file
    filler = "".join(f"sentence {i} of a long document .\n" for i in range(60_000))
    data = gzip.compress(("first .\n\n" + filler).encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[:-64])
    documents = iter_documents(path, invalid_utf8="replace")
    assert next(documents) == ["first ."]
    with pytest.raises(InputError, match="truncated or corrupt gzip file"):
        next(documents)


def test_a_pipe_is_refused_where_the_file_is_checked_first_and_read_once_where_not(tmp_path):
    fifo = tmp_path / "docs.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=f"^{fifo} is a pipe, FIFO or device: its lines can be read "
                                         "only once"):
        iter_documents(fifo)  # refused before it is opened: nothing waits for a writer
    writer = threading.Thread(target=fifo.write_text, args=("a .\n\nb .\n",), daemon=True)
    writer.start()
    try:
        assert read_documents(fifo, invalid_utf8="replace") == [["a ."], ["b ."]]
    finally:
        writer.join(timeout=10)
