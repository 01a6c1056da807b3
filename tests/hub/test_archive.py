"""contextvec.hub.archive.unpack: archives as publishers pack them unpack in whole; hostile ones
are refused in one line, leave nothing behind, and write nothing outside the target."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from contextvec.hub.archive import unpack

OPTIONS = b'{"lstm": {"dim": 8}}'
WEIGHTS = bytes(range(256)) * 4


def _tar(path: Path, *members: tuple[str, bytes | None, bytes], mode: str = "w:gz") -> Path:
    """A tar of ``(name, type, data-or-linkname)`` members (type None: a regular file)."""
    with tarfile.open(path, mode) as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind is None:
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.type = kind
                info.linkname = payload.decode()
                tar.addfile(info)
    return path


def _zip(path: Path, *members: tuple[str, bytes], link: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name)
            if link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)
    return path


def _left(tmp_path: Path) -> list[str]:
    """What is in tmp_path besides the archives: a refused unpacking leaves nothing."""
    return sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("in."))


@pytest.mark.parametrize("mode,suffix", [("w", "tar"), ("w:gz", "tar.gz"), ("w:gz", "tgz")])
def test_a_tar_unpacks_in_whole(tmp_path, mode, suffix):
    archive = _tar(tmp_path / f"in.{suffix}", ("./model/options.json", None, OPTIONS),
                   ("./model/weights.hdf5", None, WEIGHTS), mode=mode)
    target = tmp_path / "elmo"
    placed = unpack(archive, target, max_bytes=len(OPTIONS) + len(WEIGHTS))
    assert placed == [target / "model" / "options.json", target / "model" / "weights.hdf5"]
    assert [p.read_bytes() for p in placed] == [OPTIONS, WEIGHTS]
    assert _left(tmp_path) == ["elmo"]  # no temporary folder beside it


def test_a_zip_unpacks_in_whole(tmp_path):
    archive = _zip(tmp_path / "in.zip", ("144/", b""), ("144/config.json", OPTIONS),
                   ("144/encoder.pkl", WEIGHTS))
    placed = unpack(archive, tmp_path / "zh", max_bytes=10_000)
    assert placed == [tmp_path / "zh" / "144" / "config.json", tmp_path / "zh" / "144" / "encoder.pkl"]
    assert [p.read_bytes() for p in placed] == [OPTIONS, WEIGHTS]


@pytest.mark.parametrize("members,why", [
    ([("model/../../evil.txt", None, b"x")], "'model/../../evil.txt' climbs out of the target folder"),
    ([("/tmp/evil.txt", None, b"x")], "'/tmp/evil.txt' is an absolute path"),
    ([("up", tarfile.SYMTYPE, b"../.."), ("up/evil.txt", None, b"x")],
     "'up' is a link out of the target folder"),
    ([("abs", tarfile.SYMTYPE, b"/etc")], "'abs' is a link to the absolute path '/etc'"),
    ([("hard", tarfile.LNKTYPE, b"/etc/passwd")], "'hard' is a link to the absolute path '/etc/passwd'"),
    ([("model/hard", tarfile.LNKTYPE, b"../x")], "'model/hard' is a link out of the target folder"),
    ([("sub", tarfile.DIRTYPE, b""), ("in", tarfile.SYMTYPE, b"sub"), ("in/x.txt", None, b"x")],
     "'in/x.txt' lies below a symbolic link"),
    ([("null", tarfile.CHRTYPE, b"")], "'null' is a device file or FIFO"),
    ([("pipe", tarfile.FIFOTYPE, b"")], "'pipe' is a device file or FIFO"),
])
def test_a_hostile_tar_is_refused_in_one_line(tmp_path, members, why):
    archive = _tar(tmp_path / "in.tar.gz", ("model/ok.txt", None, b"fine"), *members)
    with pytest.raises(ValueError, match="^cannot unpack .*in.tar.gz: the member " + why) as caught:
        unpack(archive, tmp_path / "out" / "model", max_bytes=1000)
    assert "\n" not in str(caught.value)
    assert _left(tmp_path) == ["out"]
    assert list((tmp_path / "out").iterdir()) == []  # neither target nor temporary folder
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_an_archive_over_the_bound_is_refused_before_its_member_is_written(tmp_path):
    archive = _tar(tmp_path / "in.tar.gz", ("a.bin", None, WEIGHTS[:600]), ("b.bin", None, WEIGHTS[:600]))
    with pytest.raises(ValueError, match="'b.bin' takes the unpacked size to 1200 bytes, over the "
                                         "bound of 1000 bytes"):
        unpack(archive, tmp_path / "out", max_bytes=1000)
    assert _left(tmp_path) == []
    zipped = _zip(tmp_path / "in.zip", ("a.bin", WEIGHTS[:600]), ("b.bin", WEIGHTS[:600]))
    with pytest.raises(ValueError, match="'b.bin' takes the unpacked size to 1200 bytes"):
        unpack(zipped, tmp_path / "out", max_bytes=1000)
    assert _left(tmp_path) == []


@pytest.mark.parametrize("name,why", [
    ("../evil.txt", "climbs out of the target folder"),
    ("a\\..\\..\\evil.txt", "climbs out of the target folder"),
    ("/evil.txt", "is an absolute path"),
    ("C:/evil.txt", "is an absolute path"),
])
def test_a_zip_member_out_of_the_target_is_refused(tmp_path, name, why):
    archive = _zip(tmp_path / "in.zip", ("ok.txt", b"fine"), (name, b"x"))
    with pytest.raises(ValueError, match=f"the member {name!r} {why}".replace("\\", "\\\\")):
        unpack(archive, tmp_path / "out", max_bytes=1000)
    assert _left(tmp_path) == []


def test_a_zip_link_is_refused(tmp_path):
    archive = _zip(tmp_path / "in.zip", ("link", b"/etc/passwd"), link=True)
    with pytest.raises(ValueError, match="the member 'link' is a symbolic link"):
        unpack(archive, tmp_path / "out", max_bytes=1000)
    assert _left(tmp_path) == []


def test_damaged_or_foreign_files_and_an_existing_target(tmp_path):
    whole = _tar(tmp_path / "in.tar.gz", ("weights.bin", None, WEIGHTS * 8)).read_bytes()
    cut = tmp_path / "in.cut.tar.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ValueError, match=r"^cannot unpack .*in\.cut\.tar\.gz: Compressed file ended"):
        unpack(cut, tmp_path / "out", max_bytes=10**6)
    text = tmp_path / "in.txt"
    text.write_text("not an archive\n")
    with pytest.raises(ValueError, match=r"^cannot unpack .*in\.txt: it is neither a tar archive "
                                         r"\(plain, gzip, bzip2 or xz\) nor a zip archive$"):
        unpack(text, tmp_path / "out", max_bytes=10**6)
    assert _left(tmp_path) == []
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError, match="out: it exists; remove it first"):
        unpack(tmp_path / "in.tar.gz", tmp_path / "out", max_bytes=10**6)
