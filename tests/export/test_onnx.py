"""contextvec export: the ONNX graph in ONNX Runtime gives contextvec's fp32 vectors, for any batch
size and length, from one file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.export import manifest_path
from contextvec.text.chars import batch_to_char_ids, token_to_char_ids

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
CHAR_IDS_JSON = ROOT / "examples" / "onnx" / "char_ids.json"

# The ELMo parity goal. The two runtimes sum the same products in different orders, so each
# value differs by a few fp32 roundings (2**-24 relative) of the terms behind it: for the bundled
# model's outputs (|value| <= 3 * (layers) by proj_clip, sums over <= 512 terms) that is a few
# 1e-6, and the clipped, saturating recurrence does not grow it over time.
TOLERANCE = 1e-5
WORDS = ["the", "bank", "was", "robbed", "by", "a", "man", "who", "ran", "into", "river", ",", "and",
         "then", "(", "yes", ")", "12", "345", "Überraschung", "café", "日本語", "🙂",
         "antidisestablishmentarianism-and-more-than-fifty-bytes-long-token"]


def sentences(lengths: list[int], seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[WORDS[k] for k in rng.integers(0, len(WORDS), n)] for n in lengths]


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run_onnx(sess: ort.InferenceSession, batch: list[list[str]]) -> list[np.ndarray]:
    ids = batch_to_char_ids(batch).numpy()
    mask = (ids > 0).any(-1).astype(np.int64)
    return sess.run(None, {"char_ids": ids, "mask": mask})


def reference(encoder, batch: list[list[str]]) -> np.ndarray:
    """contextvec's layers as (batch, layers, time, dim)."""
    with torch.no_grad():
        return encoder(batch).layers.permute(1, 0, 2, 3).numpy()


def layer_differences(got: np.ndarray, want: np.ndarray) -> list[float]:
    assert got.shape == want.shape
    return [float(np.abs(got[:, k] - want[:, k]).max(initial=0.0)) for k in range(want.shape[1])]


@pytest.fixture(scope="module")
def tiny_export(own_tiny_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    contextvec.export_onnx(own_tiny_dir, out)
    return out


@pytest.fixture(scope="module")
def bundled_export(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("onnx") / "elmo-en-small.onnx"
    assert main(["export", "elmo-en-small", str(out)]) == 0
    return out


def test_the_graph_is_valid_and_each_lstm_layer_is_a_loop_over_time(tiny_export, own_tiny_dir):
    model = onnx.load(tiny_export)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
    n_layers = contextvec.load(own_tiny_dir).config.n_layers
    assert [n.op_type for n in model.graph.node].count("Scan") == n_layers
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in (*model.graph.input, *model.graph.output)]
    assert dims == [["batch", "time", 50], ["batch", "time"], ["batch", n_layers + 1, "time", 32]]


@pytest.mark.parametrize("lengths", [[1], [200], [37, 1, 200, 5, 5, 120, 2, 64],
                                     [int(n) for n in np.random.default_rng(1).integers(1, 201, 64)]],
                         ids=["one-token", "batch1-200", "mixed8", "mixed64"])
def test_tiny_model_in_onnx_runtime_equals_contextvec_on_every_layer(tiny_export, own_tiny_dir, lengths):
    encoder = contextvec.load(own_tiny_dir)
    batch = sentences(lengths)
    (got,) = run_onnx(session(tiny_export), batch)
    assert max(layer_differences(got, reference(encoder, batch))) <= TOLERANCE


def test_bundled_model_in_onnx_runtime_equals_contextvec_on_every_layer(bundled_export):
    encoder = contextvec.load()
    sess = session(bundled_export)
    for lengths in ([1], [200], [37, 1, 200, 5, 5, 120, 2, 64]):
        batch = sentences(lengths, seed=len(lengths))
        (got,) = run_onnx(sess, batch)
        assert max(layer_differences(got, reference(encoder, batch))) <= TOLERANCE, lengths


@pytest.mark.slow
def test_bundled_model_batch_64_of_mixed_lengths(bundled_export):
    encoder = contextvec.load()
    lengths = [int(n) for n in np.random.default_rng(2).integers(1, 201, 62)] + [1, 200]
    batch = sentences(lengths, seed=3)
    (got,) = run_onnx(session(bundled_export), batch)
    differences = layer_differences(got, reference(encoder, batch))
    print("max |ORT - contextvec| per layer:", differences)
    assert max(differences) <= TOLERANCE


def test_empty_sentences_and_a_batch_of_them(tiny_export, own_tiny_dir):
    encoder = contextvec.load(own_tiny_dir)
    sess = session(tiny_export)
    for batch in ([["a", "b"], []], [[]], [[], []]):
        (got,) = run_onnx(sess, batch)
        want = reference(encoder, batch)
        assert max(layer_differences(got, want)) <= TOLERANCE


@pytest.mark.parametrize("changes", [
    {"lstm_projection": False, "lstm_dim": 16},
    {"cell_clip": None, "proj_clip": 0, "use_skip_connections": False, "n_layers": 3},
    {"activation": "tanh", "n_highway": 2, "filters": ((1, 8), (2, 8))},  # no token projection
], ids=["no-projection", "no-clip-no-skip-3-layers", "tanh-2-highway-identity"])
def test_other_elmo_shapes_in_onnx_runtime_equal_contextvec(changes, tmp_path):
    from dataclasses import replace

    from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
    from contextvec.encoders.bilm.config import PRESETS

    bilm = ElmoBiLM(replace(PRESETS["tiny"], **changes))
    # The modules' own initialisation: an unclipped LSTM with weights much larger than that
    # amplifies every rounding step after step (a chaotic recurrence), in contextvec itself too.
    # Random biases so that a gate or bias mixed up would show.
    with torch.no_grad():
        for name, parameter in bilm.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.5)
    encoder = ElmoEncoder(bilm).eval()
    out = contextvec.export_onnx(encoder, tmp_path / "m.onnx")
    batch = sentences([9, 1, 30, 200])
    (got,) = run_onnx(session(out), batch)
    assert max(layer_differences(got, reference(encoder, batch))) <= TOLERANCE


def test_bilm_tf_files_export(tiny_dir, tmp_path):
    out = tmp_path / "m.onnx"
    assert main(["export", str(tiny_dir), str(out)]) == 0
    batch = sentences([12, 3])
    (got,) = run_onnx(session(out), batch)
    assert max(layer_differences(got, reference(contextvec.load(tiny_dir), batch))) <= TOLERANCE


def test_the_scalar_mix_output_is_the_mix_of_the_layers(own_tiny_dir, tmp_path):
    encoder = contextvec.load(own_tiny_dir)
    mix = contextvec.ScalarMix(encoder.num_layers, initial_weights=[0.5, -1.0, 2.0], initial_gamma=1.5)
    out = contextvec.export_onnx(encoder, tmp_path / "mixed.onnx", scalar_mix=mix)
    batch = sentences([3, 40, 1])
    layers, mixed = run_onnx(session(out), batch)
    with torch.no_grad():
        output = encoder(batch)
        want = mix(output.layers, output.mask).numpy()
    assert np.abs(mixed - want).max() <= TOLERANCE
    manifest = json.loads(manifest_path(out).read_text())
    assert [o["name"] for o in manifest["outputs"]] == ["layers", "mixed"]
    assert manifest["scalar_mix"]["gamma"] == 1.5


def test_the_manifest_names_what_the_graph_has(tiny_export, own_tiny_dir):
    manifest = json.loads(manifest_path(tiny_export).read_text())
    model = onnx.load(tiny_export)
    assert manifest["onnx_file"] == tiny_export.name
    assert manifest["opset"] == model.opset_import[0].version
    assert [i["name"] for i in manifest["inputs"]] == [i.name for i in model.graph.input]
    assert [o["name"] for o in manifest["outputs"]] == [o.name for o in model.graph.output]
    config = contextvec.load(own_tiny_dir).config
    assert (manifest["num_layers"], manifest["dim"]) == (config.n_layers + 1, 2 * config.projection_dim)
    assert manifest["char_ids"] == json.loads(CHAR_IDS_JSON.read_text(encoding="utf-8"))["contract"]


def test_the_shipped_char_id_vectors_are_contextvecs():
    vectors = json.loads(CHAR_IDS_JSON.read_text(encoding="utf-8"))["vectors"]
    assert len(vectors) >= 10
    for v in vectors:
        assert token_to_char_ids(v["token"]).tolist() == v["ids"], v["token"]


def test_export_refuses_an_existing_output_and_a_layer_norm_mix(own_tiny_dir, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    out.write_bytes(b"keep")
    assert main(["export", str(own_tiny_dir), str(out)]) == 2
    assert out.read_bytes() == b"keep"
    assert "exists" in capsys.readouterr().err
    mix = contextvec.ScalarMix(3, layer_norm=True)
    with pytest.raises(ValueError, match="layer_norm"):
        contextvec.export_onnx(own_tiny_dir, tmp_path / "n.onnx", scalar_mix=mix)
    assert main(["export", str(own_tiny_dir), str(tmp_path / "w.onnx"), "--scalar-mix", "1,2"]) == 2
    assert "2 initial weights given for 3 layers" in capsys.readouterr().err
    assert main(["export", str(own_tiny_dir), str(tmp_path / "w.onnx"), "--scalar-mix", "average",
                 "--gamma", "nan"]) == 2
    assert "--gamma: expected a finite number, got 'nan'" in capsys.readouterr().err
    assert not (tmp_path / "w.onnx").exists()


def test_without_the_onnx_extra_export_is_one_line(own_tiny_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "contextvec.export.elmo", raising=False)
    assert main(["export", str(own_tiny_dir), str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pip install 'contextvec[onnx]'" in err


def test_export_refuses_what_it_cannot_export_in_one_line(own_tiny_dir, tmp_path):
    with pytest.raises(ValueError, match="loaded in int8"):
        contextvec.export_onnx(contextvec.load(own_tiny_dir, precision="int8"), tmp_path / "q.onnx")
    with pytest.raises(ValueError, match="supports ELMo, CoVe and BERT models; this model is a ScalarMix"):
        contextvec.export_onnx(contextvec.ScalarMix(3), tmp_path / "m.onnx")
    from dataclasses import replace

    from contextvec.encoders.bilm import ElmoBiLM, ElmoEncoder
    from contextvec.encoders.bilm.config import PRESETS

    forward_only = ElmoEncoder(ElmoBiLM(replace(PRESETS["tiny"], bidirectional=False)))
    with pytest.raises(ValueError, match="forward-only LM has no ELMo representations"):
        contextvec.export_onnx(forward_only, tmp_path / "f.onnx")
    assert list(tmp_path.iterdir()) == []


def test_large_weights_go_to_a_file_beside_the_graph(own_tiny_dir, tmp_path, monkeypatch):
    import contextvec.export

    monkeypatch.setattr(contextvec.export, "EXTERNAL_DATA_BYTES", 0)  # as a GloVe-sized CoVe would
    out = contextvec.export_onnx(own_tiny_dir, tmp_path / "big.onnx")
    data = contextvec.export.weights_path(out)
    assert json.loads(manifest_path(out).read_text())["onnx_data_file"] == data.name == "big.onnx.data"
    assert data.stat().st_size > out.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json", "big.onnx", "big.onnx.data"]
    batch = sentences([7, 1, 30])
    (got,) = run_onnx(session(out), batch)
    assert max(layer_differences(got, reference(contextvec.load(own_tiny_dir), batch))) <= TOLERANCE
    monkeypatch.undo()
    contextvec.export_onnx(own_tiny_dir, out)
    assert not data.exists() and json.loads(manifest_path(out).read_text())["onnx_data_file"] is None


@pytest.mark.slow
def test_published_elmo_small_in_onnx_runtime_is_as_accurate_as_contextvec(small_dir, tmp_path):
    """bilm-tf's elmo-small (1024 cells): over 100+ steps its trained recurrence amplifies fp32
    roundings past 1e-5 in contextvec itself (the same sentence alone or in a batch differs by as
    much), so the bound here is accuracy: against contextvec in float64, ORT's fp32 error on every
    layer stays within twice contextvec's own fp32 error (two summation orders of the same sums)."""
    import copy

    encoder = contextvec.load(small_dir)
    out = contextvec.export_onnx(encoder, tmp_path / "small.onnx")
    batch = sentences([1, 200, 37, 5, 120, 64, 2, 9], seed=5)
    (got,) = run_onnx(session(out), batch)
    exact = copy.deepcopy(encoder).double()
    with torch.no_grad():
        truth = exact(batch).layers.permute(1, 0, 2, 3).numpy()
    ort_error = layer_differences(got.astype(np.float64), truth)
    own_error = layer_differences(reference(encoder, batch).astype(np.float64), truth)
    print("elmo-small fp32 error per layer: ORT", ort_error, "contextvec", own_error)
    assert all(o <= max(2 * c, TOLERANCE) for o, c in zip(ort_error, own_error, strict=True))
