"""contextvec.hub.pull against a loopback server of tiny models packed as their publishers pack
them: each pulled model then loads by its name, offline; what was downloaded is checked on load."""

from __future__ import annotations

import hashlib
import json
import logging

import h5py
import numpy as np
import pytest
from helpers_hub import (
    EFML_CHARS,
    HUB_COMMIT,
    fake_hub,
    hostile_zip,
    serving,
    tf_hub_tarball,
    write_registry,
    zip_of,
)

import contextvec
from contextvec.api import Conversion, ModelNotFoundError, ModelSpec, convert
from contextvec.hub.download import DownloadSettings
from contextvec.hub.pull import (
    CorruptModelError,
    PullError,
    PullSettings,
    list_models,
    pull,
    pulled_model,
    verify,
)

QUIET = PullSettings(DownloadSettings(timeout=2.0, retries=0, progress=False))
SENTENCES = [["The", "bank", "of", "the", "river", "."], ["Money", "in", "the", "bank"]]


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "CONTEXTVEC_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONTEXTVEC_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def bilm_tf_files(own_tiny_dir, tmp_path_factory):
    """The tiny ELMo as allennlp publishes one: options.json + weights.hdf5."""
    out = tmp_path_factory.mktemp("published") / "bilm"
    convert(Conversion(ModelSpec(str(own_tiny_dir)), to="bilm-tf"), out)
    return out


def _registry(tmp_path, monkeypatch, *entries):
    monkeypatch.setenv("CONTEXTVEC_REGISTRY", str(write_registry(tmp_path / "registry.json", list(entries))))


def _bilm_entry(url, bilm_tf_files, sha256=None):
    weights = (bilm_tf_files / "weights.hdf5").read_bytes()
    return {"name": "elmo-test", "format": "bilm-tf", "description": "tiny", "language": "en",
            "source": "test",
            "files": [{"url": f"{url}/o.json", "name": "options.json"},
                      {"url": f"{url}/w.hdf5", "name": "weights.hdf5", "size": len(weights),
                       "sha256": sha256 or hashlib.sha256(weights).hexdigest()}]}


def _serve_bilm(bilm_tf_files):
    return serving({"/o.json": (bilm_tf_files / "options.json").read_bytes(),
                    "/w.hdf5": (bilm_tf_files / "weights.hdf5").read_bytes()})


def _same_layers(a, b):
    for x, y in zip(a.embed(SENTENCES), b.embed(SENTENCES), strict=True):
        np.testing.assert_array_equal(x, y)  # the same files, loaded the same way: bit-exact


def test_a_pulled_elmo_loads_by_name_and_a_second_pull_asks_nothing(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        path = pull("elmo-test", QUIET)
        assert sorted(p.name for p in path.iterdir()) == ["options.json", "weights.hdf5"]
        asked = len(server.requests)
        assert pull("elmo-test", QUIET) == path and len(server.requests) == asked
    _same_layers(contextvec.load("elmo-test"), contextvec.load(bilm_tf_files))
    (row,) = [r for r in list_models() if r.name == "elmo-test"]
    assert row.path == path and row.size == sum(p.stat().st_size for p in path.iterdir())


def test_a_name_never_pulled_says_which_pull_to_run_and_downloads_nothing(bilm_tf_files, tmp_path,
                                                                          monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        with pytest.raises(ModelNotFoundError) as e:
            contextvec.load("elmo-test")
        assert server.requests == []
    assert "`contextvec pull elmo-test`" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache" / "models" / "elmo-test").exists()


def test_a_wrong_checksum_leaves_nothing_that_loads(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files, sha256="0" * 64))
        with pytest.raises(PullError, match="sha256 mismatch") as e:
            pull("elmo-test", QUIET)
    assert "\n" not in str(e.value)
    with pytest.raises(ModelNotFoundError, match="contextvec pull elmo-test"):
        contextvec.load("elmo-test")


@pytest.mark.parametrize("top", [None, "fr.model"], ids=["flat", "top-folder"])
def test_an_elmoformanylangs_zip_is_unpacked_and_loads(top, tmp_path, monkeypatch):
    meta = {"meta.json": b'{"id": 150}'} if top is None else {}  # the NLPL repository adds one
    with serving({"/150.zip": zip_of(EFML_CHARS, top=top, extra=meta)}) as server:
        _registry(tmp_path, monkeypatch, {
            "name": "efml-test", "format": "elmoformanylangs", "description": "tiny", "language": "fr",
            "source": "test", "archive": "zip",
            "files": [{"url": f"{server.url}/150.zip", "name": "150.zip"}]})
        path = pull("efml-test", QUIET)
    assert (path / "config.json").is_file() and path.name == (top or "efml-test")
    assert not list((tmp_path / "cache" / "downloads").iterdir())  # the archive is gone once unpacked
    _same_layers(contextvec.load("efml-test"), contextvec.load(EFML_CHARS))


def test_a_tf_hub_tarball_is_unpacked_and_loads(tmp_path, monkeypatch):
    handle = "/google/elmo/3?tf-hub-format=compressed"
    with serving({handle: tf_hub_tarball()}) as server:
        path = pull(server.url + handle, QUIET)  # a URL pulls as itself, no registry entry needed
        assert (path / "tfhub_module.pb").is_file()
        encoder = contextvec.load(server.url + handle)
    assert encoder.num_layers == 3


def test_a_hostile_archive_is_refused_and_nothing_is_placed(tmp_path, monkeypatch):
    with serving({"/bad.zip": hostile_zip()}) as server, pytest.raises(PullError, match=r"\.\.") as e:
        pull(f"{server.url}/bad.zip", QUIET)
    assert "\n" not in str(e.value)
    cache = tmp_path / "cache"
    assert not (tmp_path / "escaped.txt").exists() and not (cache / "escaped.txt").exists()
    assert [p.name for p in (cache / "models").iterdir()] == []


def test_an_archive_of_no_model_is_refused(tmp_path):
    archive = zip_of(tmp_path, extra={"README": b"hello"})
    with serving({"/x.zip": archive}) as server, pytest.raises(PullError, match="holds no model"):
        pull(f"{server.url}/x.zip", QUIET)


def test_offline_pulls_nothing_and_says_so_in_one_line(bilm_tf_files, tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTVEC_OFFLINE", "1")
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        with pytest.raises(PullError, match="CONTEXTVEC_OFFLINE") as e:
            pull("elmo-test", QUIET)
        assert server.requests == []
    assert "\n" not in str(e.value)


def test_a_down_network_is_one_line(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        entry = _bilm_entry(server.url, bilm_tf_files)
    _registry(tmp_path, monkeypatch, entry)  # the server is gone: nothing listens on its port
    with pytest.raises(PullError, match="cannot pull elmo-test: cannot download") as e:
        pull("elmo-test", QUIET)
    assert "\n" not in str(e.value)


def _pulled_elmo(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        return pull("elmo-test", QUIET)


def _corrupt_in_place(path, offset):
    """One byte of ``path`` flipped: the same size, and the record's times made the file's (as
    where the disk itself changed a byte): only its content tells."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    record_path = path.parents[1] / f"{path.parent.name}.json"
    record = json.loads(record_path.read_text())
    st = path.stat()
    record["files"][path.name].update(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
    record_path.write_text(json.dumps(record))


def _weight_offset(weights):
    """Where the data of a weight matrix starts in the HDF5 file: a flipped byte there still loads."""
    with h5py.File(weights, "r") as f:
        offset = f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"].id.get_offset()
    assert offset is not None
    return offset


def test_a_corrupted_cached_file_is_found_by_verify_and_refused_on_every_load(bilm_tf_files, tmp_path,
                                                                              monkeypatch):
    path = _pulled_elmo(bilm_tf_files, tmp_path, monkeypatch)
    assert verify("elmo-test") == (path, 2)
    contextvec.load("elmo-test")
    _corrupt_in_place(path / "weights.hdf5", _weight_offset(path / "weights.hdf5"))
    with pytest.raises(CorruptModelError, match="weights.hdf5 is not the file downloaded") as e:
        verify("elmo-test")
    assert "contextvec pull elmo-test --force" in str(e.value) and "\n" not in str(e.value)
    contextvec.load(path)  # the changed file still loads from its directory ...
    for _ in range(2):  # ... but never by its name, however often
        with pytest.raises(CorruptModelError, match="weights.hdf5 is not the file downloaded"):
            contextvec.load("elmo-test")


def test_a_corrupted_file_that_breaks_the_load_is_named_as_corrupted(bilm_tf_files, tmp_path, monkeypatch):
    path = _pulled_elmo(bilm_tf_files, tmp_path, monkeypatch)
    _corrupt_in_place(path / "options.json", 0)  # "{" no more: the loader's own error would be JSON's
    with pytest.raises(ValueError):
        contextvec.load(path)
    with pytest.raises(CorruptModelError, match="options.json is not the file downloaded") as e:
        contextvec.load("elmo-test")
    assert "\n" not in str(e.value)


def test_every_load_of_a_pulled_model_hashes_every_file(bilm_tf_files, tmp_path, monkeypatch, caplog):
    path = _pulled_elmo(bilm_tf_files, tmp_path, monkeypatch)
    with caplog.at_level(logging.DEBUG, logger="contextvec.hub.record"):
        for _ in range(2):
            _same_layers(contextvec.load("elmo-test"), contextvec.load(path))
    checks = [r.getMessage() for r in caplog.records if r.name == "contextvec.hub.record"]
    assert len(checks) == 2 and all(m.startswith("elmo-test: 2 files match the sha256") for m in checks)
    pulled = pulled_model("elmo-test")
    assert pulled.path == path and pulled.verified() == 2


def test_a_missing_or_shortened_file_is_refused_on_load(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        path = pull("elmo-test", QUIET)
    with open(path / "weights.hdf5", "r+b") as f:
        f.truncate(100)
    with pytest.raises(CorruptModelError, match="has 100 bytes"):
        contextvec.load("elmo-test")
    (path / "options.json").unlink()
    with pytest.raises(CorruptModelError, match="options.json is missing"):
        contextvec.load("elmo-test")


def test_force_fetches_again_what_is_cached(bilm_tf_files, tmp_path, monkeypatch):
    with _serve_bilm(bilm_tf_files) as server:
        _registry(tmp_path, monkeypatch, _bilm_entry(server.url, bilm_tf_files))
        path = pull("elmo-test", QUIET)
        (path / "weights.hdf5").write_bytes(b"broken")
        asked = len(server.requests)
        assert pull("elmo-test", PullSettings(QUIET.download, force=True)) == path
        assert len(server.requests) == asked + 2
    assert verify("elmo-test") == (path, 2)


def test_a_hugging_face_checkpoint_is_fetched_by_huggingface_hub_and_loads(own_tiny_bert_dir, tmp_path,
                                                                           monkeypatch):
    files = {p.name: p.read_bytes() for p in own_tiny_bert_dir.iterdir()}
    with fake_hub({"me/tiny-bert": {**files, "README.md": b"card", "tf_model.h5": b"not wanted"}}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)  # read at the call, not at huggingface_hub's import
        path = pull("hf:me/tiny-bert", QUIET)
        with pytest.raises(PullError, match="cannot pull hf:me/nothing") as e:
            pull("hf:me/nothing", QUIET)
    assert sorted(p.name for p in path.iterdir() if p.is_file()) == sorted(files)
    assert "\n" not in str(e.value) and not any("tf_model.h5" in r for r in hub.requests)
    record = (tmp_path / "cache" / "models" / "hf--me--tiny-bert.json").read_text()
    assert HUB_COMMIT in record
    _same_layers(contextvec.load("hf:me/tiny-bert"), contextvec.load(own_tiny_bert_dir))


def test_a_hugging_face_repository_without_weights_is_refused(own_tiny_bert_dir, tmp_path, monkeypatch):
    files = {p.name: p.read_bytes() for p in own_tiny_bert_dir.iterdir() if p.suffix != ".safetensors"}
    with fake_hub({"me/no-weights": files}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(PullError, match="has neither model.safetensors nor pytorch_model.bin"):
            pull("hf:me/no-weights", QUIET)
    with pytest.raises(ModelNotFoundError, match="contextvec pull hf:me/no-weights"):
        contextvec.load("hf:me/no-weights")
