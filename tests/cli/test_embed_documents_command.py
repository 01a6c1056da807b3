"""`contextvec embed --documents`: one HDF5 group per document, offsets, document context and late
chunks, the same numbers as the documents room gives in Python; refusals in one line."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import contextvec
from contextvec.cli.main import main
from contextvec.documents import DocumentSettings, embed_document

FILE = ("-DOCSTART- -X- -X- O\n\nThe bank was robbed .\nPolice  came at once .\n\n\n"
        "-DOCSTART- -X- -X- O\nWe sat on the bank of the river .\n")
DOCUMENTS = [["The bank was robbed .", "Police  came at once ."], ["We sat on the bank of the river ."]]


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text(FILE, encoding="utf-8")
    return path


def test_groups_offsets_and_document_context_match_python(tmp_path, own_tiny_dir, source):
    out = tmp_path / "out.h5"
    assert main(["embed", str(source), str(out), "--all", "--model", str(own_tiny_dir), "--documents",
                 "--context", "document", "--quiet"]) == 0
    encoder = contextvec.load(own_tiny_dir)
    with h5py.File(out, "r") as f:
        assert f.attrs["documents"] == 2 and f.attrs["context"] == "document"
        assert sorted(f) == ["0", "1"]
        for d, lines in enumerate(DOCUMENTS):
            group = f[str(d)]
            text = group["text"][()].decode()
            assert text == "\n".join(lines)
            want = embed_document(encoder, lines, DocumentSettings(context="document"))
            assert group.attrs["sentences"] == len(lines)
            for s, (tokens, vectors) in enumerate(zip(want.tokens, want.vectors, strict=True)):
                np.testing.assert_array_equal(group[str(s)][()], vectors)
                offsets = group["offsets"][str(s)][()]
                assert [text[a:b] for a, b in offsets] == tokens


def test_quiet_turns_the_documents_bar_off(tmp_path, own_tiny_dir, source, capsys):
    base = ["embed", str(source), "--all", "--model", str(own_tiny_dir), "--documents"]
    assert main([*base[:2], str(tmp_path / "a.h5"), *base[2:], "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*base[:2], str(tmp_path / "b.h5"), *base[2:]]) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1].split("\r")[-1]
    assert last.startswith("embed: ") and "sent" in last


def test_late_chunks_are_written_instead_of_tokens(tmp_path, own_tiny_dir, source):
    out = tmp_path / "out.h5"
    assert main(["embed", str(source), str(out), "--top", "--model", str(own_tiny_dir), "--documents",
                 "--chunk-tokens", "4", "--pool", "max", "--dtype", "float16", "--quiet"]) == 0
    encoder = contextvec.load(own_tiny_dir)
    want = embed_document(encoder, DOCUMENTS[0], DocumentSettings(layers="top", chunk_tokens=4, pool="max"))
    with h5py.File(out, "r") as f:
        group = f["0"]
        assert "0" not in group and group["chunks"].dtype == np.float16
        np.testing.assert_array_equal(group["chunks"][()], want.chunks.astype(np.float16))
        assert group["chunk_tokens"][()].tolist() == [[0, 4], [4, 8], [8, 10]]
        np.testing.assert_array_equal(group["chunk_offsets"][()], want.chunk_offsets)


@pytest.mark.parametrize(("options", "message"), [
    (["--documents", "--resume"], "--resume: not with --documents"),
    (["--documents", "--use-sentence-keys"], "--use-sentence-keys: not with --documents"),
    (["--context", "document"], "--context document need(s) --documents"),
    (["--chunk-tokens", "3"], "--chunk-tokens need(s) --documents"),
])
def test_options_that_do_not_fit_are_refused_in_one_line(tmp_path, own_tiny_dir, source, capsys, options,
                                                         message):
    out = tmp_path / "out.h5"
    assert main(["embed", str(source), str(out), "--top", "--model", str(own_tiny_dir), *options]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_file_without_documents_is_refused(tmp_path, own_tiny_dir, capsys):
    source = tmp_path / "empty.txt"
    source.write_text("\n-DOCSTART-\n\n", encoding="utf-8")
    assert main(["embed", str(source), str(tmp_path / "o.h5"), "--top", "--model", str(own_tiny_dir),
                 "--documents"]) == 2
    assert "holds no document" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()
