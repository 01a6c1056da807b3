"""bilm-tf checkpoints and TF-Hub ELMo modules: parity with bilm-tf's own graph, convert, refusals.

The fixtures in tests/data/tfckpt were made by bilm-tf itself (make_fixtures.py there): a
checkpoint saved by tf.train.Saver after Adagrad steps, bilm-tf's dump_weights of it, a hub
module around bilm-tf's inference graph, and their outputs on sentences with OOV, non-ASCII and
over-long tokens.
"""

from __future__ import annotations

import functools
import json
import lzma
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from helpers_io import read_h5
from helpers_tf import LEN, VARINT, field, rewrite_entry, within
from tolerance import assert_reordered_close, elmo_terms

import contextvec
from contextvec import ScalarMix
from contextvec.cli.main import main
from contextvec.encoders.bilm.tf_loader import read_hub_mix
from contextvec.encoders.registry import FAMILIES
from contextvec.io.tf_checkpoint import CheckpointError
from contextvec.io.tf_graph import elmo_graph_options

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tfckpt"
CHECKPOINT, HUB, VARIANT = FIXTURES / "checkpoint", FIXTURES / "hub", FIXTURES / "variant"
SENTENCES = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))
GOAL = 1e-5  # the agreement asked of every layer, whatever the reordering bound allows
# The model of make_fixtures.py's OPTIONS, and VARIANT's (tanh, no token projection, 3 layers,
# no clipping, no skip connections), each as a checkpoint and as a hub module.
DIRECTORIES = {"checkpoint": CHECKPOINT, "hub": HUB, "variant-checkpoint": VARIANT / "checkpoint",
               "variant-hub": VARIANT / "hub"}


@functools.cache
def _expected(root: Path) -> dict[str, np.ndarray]:
    with np.load(root / "expected.npz") as npz:
        return {key: npz[key] for key in npz.files}


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    return _expected(FIXTURES)


def _assert_layers(encoder, layers_by_sentence) -> None:
    terms = elmo_terms(encoder.config)
    got = encoder.embed(SENTENCES)
    for sentence, ours, theirs in zip(SENTENCES, got, layers_by_sentence, strict=True):
        theirs = theirs[:, : len(sentence)]
        assert ours.shape == theirs.shape
        for k in range(ours.shape[0]):
            assert_reordered_close(ours[k], theirs[k], terms=terms, msg=f"layer {k} of {sentence}")
            assert np.abs(ours[k] - theirs[k]).max() <= GOAL


@pytest.mark.parametrize("name", DIRECTORIES)
def test_every_layer_equals_bilm_tf(name):
    directory = DIRECTORIES[name]
    assert [f.name for f in FAMILIES if f.recognise(directory)] == ["tf-elmo"]
    encoder = contextvec.load(directory)
    _assert_layers(encoder, _expected(directory.parent)["lm_embeddings"])


@pytest.mark.parametrize("directory", [HUB, VARIANT / "hub"], ids=["hub", "variant-hub"])
def test_the_hub_module_outputs_and_its_mix(directory):
    expected = _expected(directory.parent)
    encoder = contextvec.load(directory)
    mix = read_hub_mix(directory)
    assert mix is not None and mix.gamma == pytest.approx(1.5) and len(mix.weights) == encoder.num_layers
    scalar_mix = ScalarMix(encoder.num_layers, initial_weights=mix.weights, initial_gamma=mix.gamma)
    dim = encoder.config.projection_dim
    for i, (sentence, layers) in enumerate(zip(SENTENCES, encoder.embed(SENTENCES), strict=True)):
        n = len(sentence)
        np.testing.assert_allclose(layers[0, :, :dim], expected["hub_word_emb"][i, :n], rtol=0, atol=GOAL)
        for k in range(1, encoder.num_layers):
            theirs = expected[f"hub_lstm_outputs{k}"][i, :n]
            np.testing.assert_allclose(layers[k], theirs, rtol=0, atol=GOAL)
        with torch.no_grad():
            elmo = scalar_mix(torch.from_numpy(layers)[:, None])[0].numpy()
        for key in ("hub_elmo", "hub_default_elmo"):  # the tokens and the default signature
            np.testing.assert_allclose(elmo, expected[key][i, :n], rtol=0, atol=GOAL)
        np.testing.assert_allclose(elmo.mean(0), expected["hub_default"][i], rtol=0, atol=GOAL)


def test_a_hub_module_takes_allennlps_options_json(tmp_path):
    """allennlp's options.json has no "bidirectional"; a module's graph always is."""
    module = tmp_path / "module"
    shutil.copytree(VARIANT / "hub", module)
    options = json.loads((module / "options.json").read_text())
    del options["bidirectional"]
    (module / "options.json").write_text(json.dumps(options))
    _assert_layers(contextvec.load(module), _expected(VARIANT)["lm_embeddings"])


def _module_with_graph(source: Path, target: Path) -> Path:
    """A copy of a fixture module with its saved_model.pb unpacked and no options.json."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("options.json", "*.xz"))
    (target / "saved_model.pb").write_bytes(lzma.decompress((source / "saved_model.pb.xz").read_bytes()))
    return target


@pytest.mark.parametrize(("source", "found"), [
    (HUB, {"char_cnn": {"activation": "relu"},
           "lstm": {"cell_clip": 3.0, "proj_clip": 3.0, "use_skip_connections": True}}),
    (VARIANT / "hub", {"char_cnn": {"activation": "tanh"},
                       "lstm": {"cell_clip": None, "proj_clip": None, "use_skip_connections": False}}),
], ids=["hub", "variant-hub"])
def test_a_modules_graph_gives_what_its_variables_do_not(tmp_path, source, found):
    """Activation, clipping and skip connections are read from saved_model.pb's ops."""
    module = _module_with_graph(source, tmp_path / "module")
    assert elmo_graph_options(module / "saved_model.pb", "bilm/") == found
    _assert_layers(contextvec.load(module), _expected(source.parent)["lm_embeddings"])


def test_the_savedmodel_form_reads_the_same_variables(tmp_path, expected):
    """A TF1 SavedModel (no tfhub_module.pb) keeps its variables the same way."""
    saved = _module_with_graph(HUB, tmp_path / "saved")
    (saved / "tfhub_module.pb").unlink()
    _assert_layers(contextvec.load(saved), expected["lm_embeddings"])


def test_convert_checkpoint_to_bilm_tf_equals_dump_weights_bit_for_bit(tmp_path):
    assert main(["convert", str(tmp_path / "tf"), "--to", "bilm-tf", "--model", str(CHECKPOINT)]) == 0
    ours, theirs = read_h5(tmp_path / "tf" / "weights.hdf5"), read_h5(FIXTURES / "dump_weights.hdf5")
    assert sorted(ours) == sorted(theirs)
    for name, array in theirs.items():
        assert ours[name].dtype == array.dtype == np.float32, name
        assert ours[name].tobytes() == array.tobytes(), name
    with h5py.File(tmp_path / "tf" / "weights.hdf5") as f:
        assert not any("softmax" in name or "Adagrad" in name for name in f)


@pytest.mark.parametrize("directory", [CHECKPOINT, HUB], ids=["checkpoint", "hub"])
def test_convert_to_native_and_back_keeps_the_outputs(directory, tmp_path):
    want = contextvec.load(directory).embed(SENTENCES)
    native = tmp_path / "native"
    assert main(["convert", str(native), "--to", "native", "--model", str(directory)]) == 0
    assert main(["convert", str(tmp_path / "tf"), "--to", "bilm-tf", "--model", str(native)]) == 0
    for path in ("native", "tf"):
        for x, y in zip(contextvec.load(tmp_path / path).embed(SENTENCES), want, strict=True):
            np.testing.assert_array_equal(x, y)


def test_embed_with_model_dir(tmp_path, expected):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(text), str(out), "--model", str(CHECKPOINT), "--all"]) == 0
    with h5py.File(out) as f:
        for i, sentence in enumerate(SENTENCES):
            theirs = expected["lm_embeddings"][i][:, : len(sentence)]
            np.testing.assert_allclose(f[str(i)][()], theirs, rtol=0, atol=GOAL)


# --------------------------------------------------------------------------- refusals


def _copy_with_options(tmp_path: Path, change) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, target)
    options = json.loads((target / "options.json").read_text())
    change(options)
    (target / "options.json").write_text(json.dumps(options))
    return target


@pytest.mark.parametrize(("change", "message"), [
    (lambda o: o.pop("char_cnn"), "a word-input bilm-tf model (no char_cnn)"),
    (lambda o: o.update(share_embedding_softmax=True) or o.pop("char_cnn"),
     "a word-input bilm-tf model (no char_cnn) with share_embedding_softmax"),
    (lambda o: o["lstm"].update(n_layers=1), "a one-layer bilm-tf model"),
    (lambda o: o.update(bidirectional=False), "a forward-only bilm-tf model"),
    (lambda o: o["lstm"].update(projection_dim=16), "LSTMs without a projection"),
], ids=["word-input", "shared-softmax", "one-layer", "forward-only", "no-projection"])
def test_unsupported_checkpoints_are_refused_in_one_line(tmp_path, capsys, change, message):
    directory = _copy_with_options(tmp_path, change)
    assert main(["convert", str(tmp_path / "out"), "--to", "native", "--model", str(directory)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(directory) in err
    assert not (tmp_path / "out").exists()


def test_options_that_do_not_describe_the_checkpoint_name_the_variable(tmp_path):
    directory = _copy_with_options(tmp_path, lambda o: o["lstm"].update(dim=32))
    with pytest.raises(CheckpointError, match=r"model.ckpt-3: variable lm/RNN_0/.*shape \(16, 64\)"):
        contextvec.load(directory)


def test_a_module_without_elmo_variables_is_named(tmp_path):
    module = tmp_path / "module"
    (module / "variables").mkdir(parents=True)
    (module / "saved_model.pb").write_bytes(b"")
    for suffix in ("index", "data-00000-of-00001"):
        shutil.copyfile(CHECKPOINT / f"model.ckpt-3.{suffix}", module / "variables" / f"variables.{suffix}")
    with pytest.raises(CheckpointError, match="no bilm/char_embed variable: not an ELMo module"):
        contextvec.load(module)


def test_a_tf2_savedmodel_is_refused_in_one_line(capsys, tmp_path):
    """TensorFlow 2 names a SavedModel's variables by object path, not by variable name."""
    model = FIXTURES / "tf2-savedmodel"
    assert main(["convert", str(tmp_path / "out"), "--to", "native", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "a TF2 SavedModel (object-based variable names); only TF1-format hub modules" in err


def test_a_truncated_module_graph_is_named(tmp_path):
    module = _module_with_graph(HUB, tmp_path / "module")
    graph = module / "saved_model.pb"
    graph.write_bytes(graph.read_bytes()[:1000])
    with pytest.raises(CheckpointError,
                       match=r"saved_model.pb: a malformed SavedModel \(field 2 runs past"):
        contextvec.load(module)


@pytest.mark.parametrize("directory", [CHECKPOINT, HUB], ids=["checkpoint", "hub"])
def test_a_tensorflow_elmo_runs_in_int8_as_the_same_model_from_hdf5_does(directory):
    # The same ELMo encoder as bilm-tf's HDF5 gives: the same low-precision path, the same vectors.
    from_tf = contextvec.load(directory, precision="int8").embed(SENTENCES)
    from_hdf5 = contextvec.load(options_file=CHECKPOINT / "options.json",
                                weight_file=FIXTURES / "dump_weights.hdf5", precision="int8").embed(SENTENCES)
    for ours, theirs in zip(from_tf, from_hdf5, strict=True):
        np.testing.assert_array_equal(ours, theirs)


# --------------------------------------------------------------------------- crafted files


def _graph(*nodes: bytes) -> bytes:
    """A saved_model.pb of one meta graph holding ``nodes`` (NodeDef bytes)."""
    return field(2, LEN, field(2, LEN, b"".join(field(1, LEN, node) for node in nodes)))


@pytest.mark.parametrize(("graph", "problem"), [
    (field(2, VARINT, 5), "SavedModel.meta_graphs (field 2) comes as varint, not length-delimited"),
    (field(2, LEN, field(2, VARINT, 5)),
     "meta_graphs[0]: MetaGraphDef.graph_def (field 2) comes as varint, not length-delimited"),
    (field(2, LEN, field(2, LEN, field(1, VARINT, 5))),
     "meta_graphs[0].graph_def: GraphDef.node (field 1) comes as varint, not length-delimited"),
    (_graph(field(1, VARINT, 5)), "node 0: NodeDef.name (field 1) comes as varint, not length-delimited"),
    (_graph(field(1, LEN, b"bilm/x") + field(2, LEN, b"\xff")),
     "node 0: a NodeDef string that is not UTF-8 ('utf-8' codec can't decode byte 0xff in position 0: "
     "invalid start byte)"),
    (field(1, VARINT, 1), "no SavedModel.meta_graphs"),
], ids=["meta_graphs", "graph_def", "node", "name", "utf-8", "no-graph"])
def test_a_savedmodel_of_other_fields_is_one_line_naming_the_field(tmp_path, capsys, graph, problem):
    module = _module_with_graph(HUB, tmp_path / "module")
    (module / "saved_model.pb").write_bytes(graph)
    assert main(["info", str(module)]) == 2
    assert capsys.readouterr().err == f"contextvec: error: {module / 'saved_model.pb'}: {problem}\n"


def test_a_crafted_checkpoint_is_exit_2_and_one_line_from_info_and_convert(tmp_path, capsys):
    """The index of the first finding: a shape stored as a varint of 2**64 - 1."""
    directory = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT, directory)
    index = directory / "model.ckpt-3.index"

    def shape_as_varint(parts):
        parts[:] = [p if p[0] != 2 else (2, VARINT, 2**64 - 1) for p in parts]

    rewrite_entry(index, "lm/char_embed", shape_as_varint)
    out = tmp_path / "out"
    convert = ["convert", str(out), "--to", "native", "--model", str(directory)]
    for argv in (["info", str(directory)], convert):
        with within(10):
            assert main(argv) == 2
        assert capsys.readouterr().err == (
            f"contextvec: error: {index}: variable 'lm/char_embed': BundleEntryProto.shape (field 2) "
            "comes as varint, not length-delimited\n")
    assert not out.exists()


def test_a_module_file_that_is_a_fifo_or_leads_out_is_refused(tmp_path):
    module = _module_with_graph(HUB, tmp_path / "module")
    (module / "saved_model.pb").unlink()
    os.mkfifo(module / "saved_model.pb")
    with within(5), pytest.raises(ValueError, match=r"saved_model.pb: is a FIFO \(named pipe\), not a "):
        contextvec.load(module)
    (module / "saved_model.pb").unlink()
    (module / "options.json").symlink_to(CHECKPOINT / "options.json")
    with within(5), pytest.raises(ValueError, match="options.json: lies outside the model directory"):
        contextvec.load(module)
