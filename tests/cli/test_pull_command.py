"""``contextvec pull`` and ``contextvec models`` against a loopback server: the path on stdout,
--verify, the table, and one line with exit code 2 for what goes wrong."""

from __future__ import annotations

import hashlib

import pytest
from helpers_hub import serving, write_registry

from contextvec.api import Conversion, ModelSpec, convert
from contextvec.cli.main import main


@pytest.fixture
def published(own_tiny_dir, tmp_path, monkeypatch):
    """A served tiny ELMo named elmo-test in a registry file, and an empty cache."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "CONTEXTVEC_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONTEXTVEC_CACHE", str(tmp_path / "cache"))
    files = convert(Conversion(ModelSpec(str(own_tiny_dir)), to="bilm-tf"), tmp_path / "bilm")
    weights = (files / "weights.hdf5").read_bytes()
    with serving({"/o.json": (files / "options.json").read_bytes(), "/w.hdf5": weights}) as server:
        write_registry(tmp_path / "r.json", [{
            "name": "elmo-test", "format": "bilm-tf", "description": "tiny", "language": "en",
            "source": "test",
            "files": [{"url": f"{server.url}/o.json", "name": "options.json"},
                      {"url": f"{server.url}/w.hdf5", "name": "weights.hdf5",
                       "sha256": hashlib.sha256(weights).hexdigest()}]}])
        monkeypatch.setenv("CONTEXTVEC_REGISTRY", str(tmp_path / "r.json"))
        yield server


def test_pull_prints_the_directory_then_verify_and_models_see_it(published, tmp_path, capsys):
    assert main(["pull", "elmo-test", "--quiet"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == str(tmp_path / "cache" / "models" / "elmo-test")
    assert main(["pull", "elmo-test", "--verify"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == path and "2 files match" in err
    assert main(["models"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("elmo-test ")]
    assert row.split()[1:3] == ["bilm-tf", "en"] and row.split()[4:] == ["KB", "yes", path]
    assert main(["models", "--cached"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line and " yes " in line]
    assert rows == ["elmo-test"]


def test_verify_of_a_corrupted_file_is_exit_2_in_one_line(published, tmp_path, capsys):
    assert main(["pull", "elmo-test", "--quiet"]) == 0
    weights = tmp_path / "cache" / "models" / "elmo-test" / "weights.hdf5"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["pull", "elmo-test", "--verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("contextvec: error: elmo-test: ") and "weights.hdf5" in err and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["pull", "elmo-test", "--verify"], {}, "run `contextvec pull elmo-test` first"),
    (["pull", "elmo-test", "--quiet"], {"CONTEXTVEC_OFFLINE": "1"}, "CONTEXTVEC_OFFLINE is set"),
    (["pull", "no-such-model"], {}, "unknown model 'no-such-model'"),
    (["pull", "elmo-test", "--verify", "--force"], {}, "not allowed with argument"),
    (["pull", "elmo-test", "--timeout", "0"], {}, "expected a number > 0"),
])
def test_what_goes_wrong_is_exit_2_in_one_line(published, monkeypatch, capsys, argv, env, says):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert published.requests == []
