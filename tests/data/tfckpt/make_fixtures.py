"""Make the TensorFlow ELMo fixtures with the original code: bilm-tf under TensorFlow's compat.v1.

Run it in an environment of its own (TensorFlow is no dependency of contextvec)::

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu==2.15.1 tensorflow_hub==0.15.0 \
        h5py "numpy<2"
    git clone https://github.com/allenai/bilm-tf /tmp/bilm-tf   # commit 7cffee2b
    /tmp/tf/bin/python tests/data/tfckpt/make_fixtures.py --bilm-tf /tmp/bilm-tf --out tests/data/tfckpt

It writes, from one tiny randomly initialised bilm-tf ``LanguageModel``:

- ``checkpoint/``: what bilm-tf's ``train`` leaves: ``options.json`` (training form,
  ``n_characters`` 261), ``vocab.txt``, the ``checkpoint`` file and ``model.ckpt-3.*`` saved by
  ``tf.train.Saver`` over all global variables, Adagrad slots and ``global_step`` included;
- ``dump_weights.hdf5``: bilm-tf's ``dump_weights`` of that checkpoint;
- ``hub/``: a TF-Hub module (``tfhub_module.pb``, ``variables/`` and its ``saved_model.pb`` as
  ``saved_model.pb.xz``, for size) built by
  ``hub.create_module_spec`` around bilm-tf's inference graph (``BidirectionalLanguageModel``,
  variables under ``bilm/``) with a scalar mix under ``aggregation/``, signatures ``tokens``
  (tokens + sequence_len) and ``default`` (strings split on spaces);
- ``variant/``: ``checkpoint/``, ``hub/`` and ``expected.npz`` of a second model taking
  bilm-tf's other branches (``VARIANT``: tanh, no token projection, three layers, no clipping,
  no skip connections); its module holds the model's ``options.json`` (a module of another model
  than the published one needs it) and a mix made by bilm-tf's ``weight_layers``;
- ``tf2-savedmodel/``: a TF2 SavedModel (object-based variable names), which contextvec refuses;
- ``expected.npz``: bilm-tf's ``lm_embeddings`` for ``SENTENCES`` (first batch of a fresh graph:
  zero LSTM state), and the hub module's ``word_emb``, ``lstm_outputs1``, ``lstm_outputs2`` and
  ``elmo`` for the same tokens; ``sentences.json``: the sentences.

bilm-tf is TensorFlow 1 code; it runs unchanged with ``tensorflow`` pointing at
``tensorflow.compat.v1`` in ``sys.modules``, which this script sets before importing it.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

SEED = 1234
VOCAB = ["<S>", "</S>", "<UNK>", "the", "a", "cat", "dog", "sat", "on", "mat", "and", "ran",
         "to", "house", "big", "small", "red", "blue", "is", "."]
SENTENCES = [
    ["the", "cat", "sat", "on", "the", "mat", "."],
    ["a", "zebra", "ran", "to", "the", "château", "!"],  # OOV words, non-ASCII
    ["日本語", "and", "naïve", "émigrés", "🙂"],
    ["pneumonoultramicroscopicsilicovolcanoconiosis" * 2, "is", "long"],  # over 50 characters
    ["ééééééééééééééééééééééééééééééééééééééééééééééééééé", "big"],  # cut inside a character
    ["dog"],
]
OPTIONS = {
    "bidirectional": True,
    "char_cnn": {"activation": "relu", "embedding": {"dim": 4},
                 "filters": [[1, 4], [2, 8], [3, 8]], "max_characters_per_token": 50,
                 "n_characters": 261, "n_highway": 2},
    "dropout": 0.1,
    "lstm": {"cell_clip": 3, "dim": 16, "n_layers": 2, "proj_clip": 3, "projection_dim": 8,
             "use_skip_connections": True},
    "all_clip_norm_val": 10.0, "n_epochs": 1, "n_train_tokens": 1000, "batch_size": 2,
    "n_tokens_vocab": len(VOCAB), "unroll_steps": 4, "n_negative_samples_batch": 8,
}
VARIANT = {  # the other branches: tanh, no token projection, 3 layers, no clipping or skips
    **OPTIONS,
    "char_cnn": {**OPTIONS["char_cnn"], "activation": "tanh", "embedding": {"dim": 2},
                 "filters": [[1, 2], [2, 2]], "n_highway": 1},
    "lstm": {"cell_clip": None, "dim": 6, "n_layers": 3, "proj_clip": None, "projection_dim": 4,
             "use_skip_connections": False},
}
STEP = 3
MIX = [0.3, -0.2, 0.5, 0.1]  # the hub module's aggregation/weights (its first n_layers + 1)


def tf_v1():
    import tensorflow

    tf = tensorflow.compat.v1
    tf.disable_v2_behavior()
    sys.modules["tensorflow"] = tf  # bilm-tf's `import tensorflow as tf` gets the v1 API
    return tf


def make_checkpoint(tf, out: Path, options: dict) -> None:
    """A LanguageModel as bilm-tf's train() builds it, one Adagrad step, saved by tf.train.Saver."""
    from bilm.training import LanguageModel

    out.mkdir(parents=True)
    (out / "options.json").write_text(json.dumps(options))
    (out / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(SEED)
        global_step = tf.get_variable("global_step", [], initializer=tf.constant_initializer(0),
                                      trainable=False)
        opt = tf.train.AdagradOptimizer(learning_rate=0.2, initial_accumulator_value=1.0)
        with tf.variable_scope("lm"):
            model = LanguageModel(options, True)
        train_op = opt.apply_gradients(opt.compute_gradients(model.total_loss), global_step=global_step)
        # bilm-tf initialises every variable randomly except the biases; give those values too, so
        # that a bias read from the wrong place cannot go unseen.
        rng = np.random.default_rng(SEED)
        bias_ops = [v.assign(rng.uniform(-0.5, 0.5, v.shape.as_list()).astype(np.float32))
                    for v in tf.trainable_variables() if re.search(r"/(b|b_\w+|bias):0$", v.name)]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(bias_ops)
            ids = rng.integers(1, 261, size=(2, 4, 50))
            feed = {model.tokens_characters: ids, model.tokens_characters_reverse: ids[:, ::-1],
                    model.next_token_id: rng.integers(0, len(VOCAB), (2, 4)),
                    model.next_token_id_reverse: rng.integers(0, len(VOCAB), (2, 4))}
            for _ in range(STEP):
                sess.run(train_op, feed)
            # The .meta graph (a megabyte even for this model) is not read by contextvec.
            tf.train.Saver(tf.global_variables(), max_to_keep=2).save(
                sess, str(out / "model.ckpt"), global_step=global_step, write_meta_graph=False)
    # bilm-tf writes absolute paths; keep the file relative so the fixture can move.
    (out / "checkpoint").write_text(f'model_checkpoint_path: "model.ckpt-{STEP}"\n'
                                    f'all_model_checkpoint_paths: "model.ckpt-{STEP}"\n')


def inference_options(work: Path, options: dict) -> Path:
    options = json.loads(json.dumps(options))
    options["char_cnn"]["n_characters"] = 262  # bilm-tf's README: 262 after training
    path = work / "options262.json"
    path.write_text(json.dumps(options))
    return path


def run_bilm(tf, options_file: Path, weight_file: Path, vocab: Path) -> np.ndarray:
    """bilm-tf's BidirectionalLanguageModel on SENTENCES, one batch from zero state."""
    from bilm import Batcher, BidirectionalLanguageModel

    with tf.Graph().as_default():
        batcher = Batcher(str(vocab), 50)
        ids = tf.placeholder("int32", shape=(None, None, 50))
        ops = BidirectionalLanguageModel(str(options_file), str(weight_file))(ids)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(ops["lm_embeddings"], {ids: batcher.batch_sentences(SENTENCES)})


def hub_module_fn(tf, hub, options_file: Path, weight_file: Path, bilm_tf_mix: bool):
    """A module_fn: bytes -> bilm-tf character ids in the graph, bilm-tf's LM, a scalar mix
    (under the published modules' names, or bilm-tf's ``weight_layers``)."""
    from bilm import BidirectionalLanguageModel, weight_layers

    def char_ids(tokens, lengths):
        # bilm-tf's ids: BOW, up to 48 UTF-8 bytes, EOW, in-word padding; all + 1, 0 = no token.
        def one(token):
            raw = tf.cast(tf.decode_raw(token, tf.uint8), tf.int32)[:48]
            pad = tf.fill([48 - tf.shape(raw)[0]], 260)
            return tf.concat([[258], raw, [259], pad], 0)

        flat = tf.map_fn(one, tf.reshape(tokens, [-1]), dtype=tf.int32, back_prop=False)
        ids = tf.reshape(flat, [tf.shape(tokens)[0], tf.shape(tokens)[1], 50]) + 1
        mask = tf.sequence_mask(lengths, tf.shape(tokens)[1])
        ids = ids * tf.cast(mask, tf.int32)[:, :, None]

        def boundary(c):
            return tf.constant([259, c + 1, 260] + [261] * 47, tf.int32)

        # <S> first, </S> right after each sentence's last token.
        batch = tf.shape(tokens)[0]
        bos = tf.tile(boundary(256)[None, None], [batch, 1, 1])
        padded = tf.concat([bos, ids, tf.zeros([batch, 1, 50], tf.int32)], 1)
        eos_at = tf.one_hot(lengths + 1, tf.shape(padded)[1], dtype=tf.int32)[:, :, None]
        return padded + eos_at * boundary(257)[None, None]

    n_out = json.loads(options_file.read_text())["lstm"]["n_layers"] + 1

    def outputs(bilm, ids, lengths, reuse):
        ops = bilm(ids)
        lm = ops["lm_embeddings"]  # (batch, n_out, time, 2 * projection_dim)
        if bilm_tf_mix:  # bilm-tf's own weight_layers: variables elmo_output_ELMo_W and _gamma
            with tf.variable_scope(tf.get_variable_scope(), reuse=reuse):
                elmo = weight_layers("elmo_output", ops, l2_coef=0.0)["weighted_op"]
        else:  # the published modules' names
            with tf.variable_scope("aggregation", reuse=reuse):
                w = tf.get_variable("weights", [n_out], initializer=tf.constant_initializer(MIX[:n_out]))
                gamma = tf.get_variable("scaling", [1], initializer=tf.constant_initializer(1.5))
            s = tf.nn.softmax(w)
            elmo = gamma * tf.add_n([s[k] * lm[:, k] for k in range(n_out)])
        mask = tf.cast(tf.sequence_mask(lengths, tf.shape(lm)[2]), tf.float32)[:, :, None]
        return {"word_emb": ops["token_embeddings"][:, 1:-1], "elmo": elmo,
                **{f"lstm_outputs{k}": lm[:, k] for k in range(1, n_out)},
                "default": tf.reduce_sum(elmo * mask, 1) / tf.reduce_sum(mask, 1)}

    def module_fn():
        # A small max_batch_size keeps bilm-tf's LSTM state variables (saved too) small.
        bilm = BidirectionalLanguageModel(str(options_file), str(weight_file), max_batch_size=8)
        tokens = tf.placeholder(tf.string, [None, None])
        lengths = tf.placeholder(tf.int32, [None])
        hub.add_signature("tokens", {"tokens": tokens, "sequence_len": lengths},
                          outputs(bilm, char_ids(tokens, lengths), lengths, False))
        strings = tf.placeholder(tf.string, [None])
        split = tf.string_split(strings, " ")
        dense = tf.sparse.to_dense(split, default_value="")
        n = tf.reduce_sum(tf.cast(tf.not_equal(dense, ""), tf.int32), 1)
        hub.add_signature("default", {"strings": strings},
                          outputs(bilm, char_ids(dense, n), n, True))

    return module_fn


def make_hub(tf, options_file: Path, weight_file: Path, out: Path,
             bilm_tf_mix: bool) -> dict[str, np.ndarray]:
    import tensorflow_hub as hub

    spec = hub.create_module_spec(hub_module_fn(tf, hub, options_file, weight_file, bilm_tf_mix))
    width = max(len(s) for s in SENTENCES)
    tokens = np.array([s + [""] * (width - len(s)) for s in SENTENCES], dtype=object)
    with tf.Graph().as_default():
        module = hub.Module(spec)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for v in tf.global_variables():  # weight_layers starts from zeros and one
                if v.name.endswith("_ELMo_W:0"):
                    sess.run(v.assign(MIX[: v.shape[0]]))
                elif v.name.endswith("_ELMo_gamma:0"):
                    sess.run(v.assign([1.5]))
            module.export(str(out), sess)
    with tf.Graph().as_default():  # the exported module, read back as a user would
        module = hub.Module(str(out))
        got = module({"tokens": tokens, "sequence_len": [len(s) for s in SENTENCES]},
                     signature="tokens", as_dict=True)
        default = module([" ".join(s) for s in SENTENCES], signature="default", as_dict=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run({**{f"hub_{k}": v for k, v in got.items()},
                               "hub_default_elmo": default["elmo"]})
    return values


TF2_SAVEDMODEL = """
import sys
import tensorflow as tf
module = tf.Module()
module.char_embed = tf.Variable(tf.zeros([262, 4]), name="bilm/char_embed")
tf.saved_model.save(module, sys.argv[1])
"""


def make_tf2_savedmodel(out: Path) -> None:
    """A TF2 SavedModel, which names variables by object path; in a process of its own (eager)."""
    subprocess.run([sys.executable, "-c", TF2_SAVEDMODEL, str(out)], check=True)
    for kept in ("assets", "fingerprint.pb"):
        path = out / kept
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def make_set(tf, options: dict, out: Path, work: Path, keep_dump: bool) -> None:
    """checkpoint/, hub/, expected.npz (and dump_weights.hdf5) for one model in ``out``."""
    from bilm.training import dump_weights

    out.mkdir(parents=True, exist_ok=True)
    make_checkpoint(tf, out / "checkpoint", options)
    dumped = (out if keep_dump else work) / "dump_weights.hdf5"
    with tf.Graph().as_default():
        dump_weights(str(out / "checkpoint"), str(dumped))
    options262 = inference_options(work, options)
    lm = run_bilm(tf, options262, dumped, out / "checkpoint" / "vocab.txt")
    hub_values = make_hub(tf, options262, dumped, out / "hub", bilm_tf_mix=options is not OPTIONS)
    # The module's graph (600 KB) is kept compressed; tests unpack it into a copy of the module.
    graph = out / "hub" / "saved_model.pb"
    packed = lzma.compress(graph.read_bytes(), preset=9 | lzma.PRESET_EXTREME)
    graph.with_suffix(".pb.xz").write_bytes(packed)
    graph.unlink()
    if options is not OPTIONS:  # the published model's graph options do not hold for it
        shutil.copyfile(out / "checkpoint" / "options.json", out / "hub" / "options.json")
    lengths = np.array([len(s) for s in SENTENCES])
    np.savez_compressed(out / "expected.npz", lm_embeddings=lm, lengths=lengths, **hub_values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bilm-tf", type=Path, required=True, help="a bilm-tf source checkout")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(args.bilm_tf.resolve()))
    tf = tf_v1()
    for name in ("checkpoint", "hub", "variant", "tf2-savedmodel", "dump_weights.hdf5", "expected.npz",
                 "sentences.json"):
        target = args.out / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    make_tf2_savedmodel(args.out / "tf2-savedmodel")
    make_set(tf, OPTIONS, args.out, work, keep_dump=True)
    make_set(tf, VARIANT, args.out / "variant", work, keep_dump=False)
    (args.out / "sentences.json").write_text(json.dumps(SENTENCES, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
    shutil.rmtree(work)
    print("wrote", sorted(p.name for p in args.out.iterdir()))


if __name__ == "__main__":
    main()
