"""The registry of published models: its entries as their publishers give them, names resolved
(registry, hf:, URL), a registry file checked in one line."""

from __future__ import annotations

import pytest
from helpers_hub import write_registry

from contextvec.hub.registry import (
    BUILT_IN,
    ArchiveKind,
    ModelFormat,
    PublishedModel,
    RemoteFile,
    UnknownModelError,
    read_registry,
    registry,
    resolve,
)

ALLENNLP = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway"
BASE = {"name": "x", "format": "bilm-tf", "description": "", "language": "en", "source": "s"}


def test_allennlps_models_are_the_pages_options_and_weights():
    original = BUILT_IN["elmo-original"]
    assert original.format == ModelFormat.BILM_TF and original.archive is None
    assert [(f.name, f.url) for f in original.files] == [
        ("options.json", f"{ALLENNLP}/elmo_2x4096_512_2048cnn_2xhighway_options.json"),
        ("weights.hdf5", f"{ALLENNLP}/elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5")]
    pubmed = BUILT_IN["elmo-pubmed"].files[1].url
    assert pubmed.endswith("/contributed/pubmed/elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5")
    assert {n for n in BUILT_IN if n.startswith("elmo-")} == {
        "elmo-small", "elmo-medium", "elmo-original", "elmo-original-5.5b", "elmo-pt-wikipedia",
        "elmo-pt-brwac", "elmo-pubmed", "elmo-ja"}


def test_elmoformanylangs_has_every_language_of_its_readme_as_an_nlpl_zip():
    many = [m for m in BUILT_IN.values() if m.format == ModelFormat.ELMOFORMANYLANGS]
    assert len(many) == 45  # 44 languages of the table, and simplified Chinese
    zips = [m for m in many if m.archive == ArchiveKind.ZIP]
    nlpl = {f"http://vectors.nlpl.eu/repository/11/{i}.zip" for i in range(136, 180)}
    assert {m.files[0].url for m in zips} == nlpl
    assert BUILT_IN["elmoformanylangs-fr"].files[0].url.endswith("/150.zip")


def test_every_entry_cites_its_source_and_states_no_invented_checksum():
    for model in BUILT_IN.values():
        assert model.source and model.language, model.name
        assert all(f.sha256 is None for f in model.files), model.name  # no publisher states one
        assert (model.hf_repo is None) == (model.format != ModelFormat.HF_BERT), model.name


def test_names_resolve_to_registry_entries_hub_ids_and_archive_urls():
    assert resolve("tfhub-elmo-3").archive == ArchiveKind.TAR_GZ
    hf = resolve("hf:google-bert/bert-base-cased")
    assert hf.format == ModelFormat.HF_BERT and hf.hf_repo == "google-bert/bert-base-cased"
    url = resolve("https://example.org/models/142.zip")
    assert url.archive == ArchiveKind.ZIP and url.format is None and url.files[0].url.endswith("142.zip")
    assert resolve("https://example.org/m?tf-hub-format=compressed").archive == ArchiveKind.TAR_GZ


@pytest.mark.parametrize(("name", "says"), [
    ("elmo-orignal", "unknown model 'elmo-orignal'"),
    ("hf:", "after hf: comes a Hugging Face Hub id"),
    ("https://example.org/weights.hdf5", "is an archive"),
])
def test_an_unknown_name_is_one_line(name, says):
    with pytest.raises(UnknownModelError) as e:
        resolve(name)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_registry_file_adds_and_replaces_entries(tmp_path, monkeypatch):
    path = write_registry(tmp_path / "r.json", [
        {**BASE, "name": "elmo-original",
         "files": [{"url": "http://127.0.0.1:1/w.hdf5", "name": "weights.hdf5", "size": 3}]},
        {**BASE, "name": "mine", "format": "hf-bert", "hf_repo": "me/mine"}])
    monkeypatch.setenv("CONTEXTVEC_REGISTRY", str(path))
    known = registry()
    assert known["elmo-original"].files == (RemoteFile("http://127.0.0.1:1/w.hdf5", "weights.hdf5", 3),)
    assert known["mine"].hf_repo == "me/mine" and "elmo-small" in known


@pytest.mark.parametrize(("entry", "says"), [
    (BASE, "give files or hf_repo"),
    ({**BASE, "format": "onnx", "hf_repo": "a/b"}, "format must be one of"),
    ({**BASE, "files": [{"url": "ftp://h/w", "name": "w"}]}, "http:// or https://"),
    ({**BASE, "files": [{"url": "http://h/w", "name": "../w"}]}, "plain file name"),
    ({**BASE, "files": [{"url": "http://h/w", "name": "w", "sha256": "abc"}]}, "64 hexadecimal digits"),
    ({**BASE, "mirror": 1}, "unknown field(s) mirror"),
])
def test_a_bad_registry_entry_names_the_file_and_entry(tmp_path, entry, says):
    path = write_registry(tmp_path / "r.json", [entry])
    with pytest.raises(ValueError) as e:
        read_registry(path)
    assert str(e.value).startswith(f"{path}: models[0]") and says in str(e.value) and "\n" not in str(e.value)


def test_an_archive_is_one_file():
    with pytest.raises(ValueError, match="an archive is one file"):
        PublishedModel("x", "bilm-tf", "", "en", "s", archive="zip",
                       files=(RemoteFile("http://h/a", "a"), RemoteFile("http://h/b", "b")))
