"""Messages a newcomer can act on, and defaults that say what they are (docs/bad-input.md,
"Messages, defaults and numbers"). Commands run in-process through ``main([...])`` on tiny models:
a refused input is exit code 2 and one line on stderr."""

from __future__ import annotations

import json
import re

import h5py
import pytest

from contextvec.cli.main import main


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the bank was robbed .\nwe sat on the bank .\n" * 4)
    return path


# -- a command that needs a biLM, given another kind of model ----------------------------------

@pytest.mark.parametrize("kind", ["BERT", "CoVe"])
def test_perplexity_and_init_name_the_kind_of_model_they_were_given(kind, corpus, tmp_path, capsys,
                                                                    own_tiny_bert_dir):
    model = own_tiny_bert_dir if kind == "BERT" else "cove-en-multi30k"
    wanted = (f"this command needs a biLM (ELMo) trained by train-bilm or elmo-en-small; "
              f"{model} is a {kind} model")
    code, _, err = _run(capsys, "perplexity", "--model", model, corpus)
    assert code == 2 and _one_line(err) == f"contextvec: error: {wanted}"
    code, _, err = _run(capsys, "train-bilm", "--train", corpus, "--init", model,
                        "--output-dir", tmp_path / "out")
    assert code == 2 and _one_line(err) == f"contextvec: error: {wanted}"


@pytest.mark.parametrize("command", ["translate", "eval-bert"])
def test_translate_and_eval_bert_name_the_kind_of_model_they_were_given(command, corpus, capsys,
                                                                        own_tiny_bert_dir):
    """They said "not a contextvec config ('config')" and "elmo-en-small/config.json: not a
    readable config.json ([Errno 2] ...)"."""
    if command == "translate":
        model, wanted = own_tiny_bert_dir, "a translation model trained by train-mt"
        kind = "a BERT model"
    else:
        model, wanted = "elmo-en-small", "a BERT with its pretraining heads (train-bert's model/)"
        kind = "an ELMo biLM"
    code, _, err = _run(capsys, command, corpus, "--model", model)
    assert code == 2
    assert _one_line(err) == f"contextvec: error: this command needs {wanted}; {model} is {kind}"


def test_perplexity_of_a_missing_model_directory(corpus, tmp_path, capsys):
    code, _, err = _run(capsys, "perplexity", "--model", tmp_path / "nope", corpus)
    assert code == 2 and f"no model directory {tmp_path / 'nope'}: this command needs" in _one_line(err)


# -- a resume refused: what differs, in words -----------------------------------------------------

def test_a_refused_resume_names_what_differs_in_words(corpus, tmp_path, own_tiny_dir, capsys):
    out = tmp_path / "out.h5"
    assert _run(capsys, "embed", corpus, out, "--all", "--model", own_tiny_dir, "--quiet")[0] == 0
    code, _, err = _run(capsys, "embed", corpus, out, "--top", "--model", own_tiny_dir, "--quiet", "--resume")
    assert code == 2 and _one_line(err) == (f"contextvec: error: {out} was made by another run: layers "
                                            "'all' (now 'top'); pass --overwrite to replace it")
    other = tmp_path / "other.txt"
    other.write_text("a b\n")
    code, _, err = _run(capsys, "embed", other, out, "--all", "--model", own_tiny_dir, "--quiet", "--resume")
    assert code == 2 and "was made by another run: another input (input_sha256); n_lines 8 (now 1)" in err
    with h5py.File(out) as f:
        assert f["0"].shape[0] == 3  # kept: --all


# -- defaults that say what they are --------------------------------------------------------------

@pytest.mark.parametrize(("command", "message"), [
    ("train-bilm", "train-bilm needs --preset (elmo-en-small, elmo-medium, elmo-original, "
                   "elmo-small, kim-large, kim-small, tiny; see docs/training.md), --config FILE or "
                   "--init MODEL"),
    ("train-bert", "train-bert needs --preset (bert-mini, bert-tiny; see "
                   "docs/bert-pretraining.md) or --config FILE"),
])
def test_training_needs_a_preset_or_config(corpus, tmp_path, capsys, command, message):
    """They used to train their `tiny`/`bert-tiny` test presets; nothing is written or removed first."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint.pt").write_text("an earlier run's")
    code, _, err = _run(capsys, command, "--train", corpus, "--output-dir", out, "--overwrite")
    assert code == 2 and _one_line(err) == f"contextvec: error: {message}"
    assert (out / "checkpoint.pt").read_text() == "an earlier run's"


@pytest.mark.parametrize(("given", "problem"), [
    ("missing", "does not exist"), ("vocab.txt", "is not a directory"), ("empty", "has no vocab.txt")])
def test_train_bert_says_what_is_wrong_with_the_vocab(given, problem, corpus, tmp_path, capsys):
    """A missing --vocab was "no vocab.txt", as if the directory were there; nothing is removed."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint.pt").write_text("an earlier run's")
    vocab = tmp_path / given
    code, _, err = _run(capsys, "train-bert", "--train", corpus, "--output-dir", out, "--preset", "bert-tiny",
                        "--vocab", vocab, "--overwrite")
    assert code == 2 and _one_line(err) == (
        f"contextvec: error: --vocab {vocab} {problem}: --vocab is a tokenizer directory holding vocab.txt, "
        "as contextvec train-wordpiece writes")
    assert (out / "checkpoint.pt").read_text() == "an earlier run's"


def test_init_says_which_tokenizer_it_reads_with(corpus, tmp_path, capsys):
    """The model's recorded tokenizer by default; an explicit --tokenizer (text already cut the
    model's way, as docs/training.md's CoNLL run) is honoured. Either way, one line on stderr."""
    run = ("train-bilm", "--train", corpus, "--init", "elmo-en-small", "--max-steps", "1", "--rows", "2",
           "--unroll", "4", "--quiet")
    code, out, err = _run(capsys, *run, "--output-dir", tmp_path / "recorded")
    assert code == 0 and _one_line(err) == (
        "train-bilm: reading the text with elmo-en-small's tokenizer, moses-sentences (not whitespace): "
        "the one its vocabulary was made with")
    assert "tokenizer moses-sentences" in out
    code, out, err = _run(capsys, *run, "--output-dir", tmp_path / "given", "--tokenizer", "whitespace")
    assert code == 0 and _one_line(err) == (
        "train-bilm: reading the text with --tokenizer whitespace, not elmo-en-small's moses-sentences: "
        "its tokens must be cut as the model's vocabulary was")


# -- numbers: refused at parse time naming the option and its range, or they work ----------------

HUGE = str(10**12)


@pytest.mark.parametrize(("argv", "refused"), [
    (["train-wordpiece", "--train", "T", "--output", "O", "--vocab-size", HUGE],
     "argument --vocab-size: expected an integer in 1..1048576"),  # tokenizers aborted the process
    (["train-bert", "--train", "T", "--output-dir", "O", "--vocab-size", HUGE],
     "argument --vocab-size: expected an integer in 1..1048576"),
    (["train-word-vectors", "--train", "T", "--output", "O", "--window", HUGE],
     "argument --window: expected an integer in 1..2147483647"),  # gensim hung on an OverflowError
    (["train-word-vectors", "--train", "T", "--output", "O", "--negative", HUGE],
     "argument --negative: expected an integer in 0..2147483647"),
    (["train-word-vectors", "--train", "T", "--output", "O", "--seed", HUGE],
     "argument --seed: expected an integer in 0..4294967295"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--seed", HUGE],
     "argument --seed: expected an integer in 0..4294967295"),
    (["train-task", "trec", "--train", "T", "--seed", HUGE],
     "argument --seed: expected an integer in 0..4294967295"),
    (["experiment", "representations", "trec", "--train", "T", "--output-dir", "O", "--seeds", "0", HUGE],
     "argument --seeds: expected an integer in 0..4294967295"),
    (["embed", "I", "O", "--threads", HUGE], "argument --threads: expected an integer in 1..4096"),
    (["train-bilm", "--train", "T", "--output-dir", "O", "--lr", "1e300"],
     "argument --lr: expected a number > 0 (at most 3.4e38)"),  # torch: "cannot be converted to float"
])
def test_numbers_beyond_what_the_libraries_take_are_refused_at_parse_time(argv, refused, capsys):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and refused in _one_line(err)


def test_more_threads_than_cpus_is_said_in_one_line(corpus, tmp_path, own_tiny_dir, capsys, monkeypatch):
    from contextvec.cli import common

    monkeypatch.setattr(common, "usable_cpus", lambda: 2)
    code, _, err = _run(capsys, "embed", corpus, tmp_path / "o.h5", "--top", "--model", own_tiny_dir,
                        "--threads", "3", "--quiet")
    assert code == 0 and _one_line(err) == (
        "contextvec: warning: --threads 3 is more than the 2 CPU(s) this process may use here; threads "
        "beyond them take turns, which is slower")
    assert _run(capsys, "embed", corpus, tmp_path / "p.h5", "--top", "--model", own_tiny_dir,
                "--threads", "2", "--quiet")[2] == ""


def test_sizes_beyond_memory_are_one_line(corpus, capsys):
    code, _, err = _run(capsys, "perplexity", "--model", "elmo-en-small", corpus, "--rows", HUGE, "--quiet")
    assert code == 2 and _one_line(err).startswith("contextvec: error: out of memory: ")


@pytest.mark.parametrize(("option", "value"), [("--max-vocab", "3"), ("--min-count", "1000")])
def test_a_vocabulary_that_keeps_no_word_is_not_called_an_empty_corpus(corpus, tmp_path, capsys, option,
                                                                       value):
    """It said "no tokens in CORPUS" of a corpus full of tokens."""
    code, _, err = _run(capsys, "train-bilm", "--train", corpus, "--output-dir", tmp_path / "o", "--preset",
                        "tiny", option, value, "--quiet")
    assert code == 2
    assert _one_line(err).startswith(f"contextvec: error: the vocabulary keeps no word of {corpus}: ")
    assert "(which counts the 3 specials <S> </S> <UNK>) leave none" in err



# -- a saved task model where an encoder is wanted; predict's input and scores --------------------

@pytest.fixture(scope="module")
def saved_task(tmp_path_factory):
    """A real `train-task --save-model` directory (sst2, no encoder: quick) and its dev file."""
    root = tmp_path_factory.mktemp("saved-task")
    words = ["a", "film", "it", "was", "plot"]
    cue = {"0": "bad", "4": "good"}
    lines = [f"({label} (2 {words[i % 5]}) (2 {words[i * 3 % 5]}) ({label} {cue[label]}))"
             for i, label in enumerate("0404004440" * 3)]
    data = root / "sst.txt"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["train-task", "sst2", "--train", data, "--dev", data, "--no-contextual", "--epochs", "1",
            "--hidden", "4", "--word-dim", "4", "--quiet", "--threads", "1", "--save-model", root / "m",
            "--output", root / "report.json"]
    assert main([str(a) for a in argv]) == 0
    return root / "m", data


@pytest.mark.parametrize("argv", [
    ["info", "{m}"], ["export", "{m}", "{out}/m.onnx"],
    ["convert", "{out}/c", "--to", "native", "--model", "{m}"],
    ["embed", "{data}", "{out}/e.h5", "--top", "--model", "{m}", "--quiet"],
])
def test_a_saved_task_model_given_as_a_model_says_what_it_is_and_what_runs_it(argv, saved_task, tmp_path,
                                                                              capsys):
    """It said "not a model directory (expected options.json + weights.hdf5, ...)"."""
    model, data = saved_task
    code, _, err = _run(capsys, *(a.format(m=model, out=tmp_path, data=data) for a in argv))
    wanted = (f"contextvec: error: {model} is a task model saved by train-task --save-model, not an "
              f"encoder: run it with `contextvec predict {model} INPUT` (Python: "
              "contextvec.tasks.load_task_model); its task.json names the encoder it was trained on")
    assert code == 2 and _one_line(err) == wanted
    import contextvec

    with pytest.raises(FileNotFoundError, match="is a task model saved by train-task --save-model"):
        contextvec.load(model)


@pytest.mark.parametrize("name", ["empty.txt", "empty.txt.gz"])
def test_predict_refuses_an_empty_file_as_embed_does(name, saved_task, tmp_path, capsys):
    """It predicted nothing and exited 0."""
    import gzip

    empty = tmp_path / name
    empty.write_bytes(gzip.compress(b"") if name.endswith(".gz") else b"")
    code, out, err = _run(capsys, "predict", saved_task[0], empty, "--quiet")
    assert code == 2 and out == ""
    assert _one_line(err) == f"contextvec: error: {empty} is empty: there is nothing to predict"
    code, _, err = _run(capsys, "embed", empty, tmp_path / "e.h5", "--top", "--quiet")
    assert code == 2 and _one_line(err) == f"contextvec: error: {empty} is empty: there is nothing to embed"


def test_predict_prints_scores_to_four_decimals_as_train_task_does(saved_task, tmp_path, capsys):
    """It printed "(training reported dev accuracy 0.7174311926605504)"."""
    model, data = saved_task
    code, out, _ = _run(capsys, "predict", model, data, tmp_path / "p.jsonl", "--format", "task", "--score",
                        "--quiet")
    reported = json.loads((model / "task.json").read_text(encoding="utf-8"))["reported"]["dev"]
    line = _one_line(out)
    assert code == 0 and re.fullmatch(
        rf"sst2 accuracy \d\.\d{{4}} on 30 sentences of {re.escape(str(data))} "
        rf"\(training reported dev accuracy {reported:.4f}\)", line), line


@pytest.mark.parametrize("flags", [frozenset({"avx2"}),
                                   frozenset({"avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"})])
def test_info_speaks_of_the_parts_each_family_has(flags, own_tiny_dir, own_tiny_bert_dir, capsys,
                                                  monkeypatch):
    """`contextvec info` of a BERT said int8 keeps "ELMo's token encoder in bf16" (and, on AVX2,
    that its LSTMs run on fbgemm)."""
    from contextvec import api
    from contextvec.encoders.cpu import inference_paths

    paths = inference_paths(flags=flags, cap="", int8_exact=True, fbgemm=True)
    monkeypatch.setattr(api, "inference_paths", lambda: paths)
    kept = paths["int8"].kept_precision
    code, bert, _ = _run(capsys, "info", own_tiny_bert_dir)
    int8 = next(line for line in bert.splitlines() if line.lstrip().startswith("int8:"))
    assert code == 0 and "via oneDNN int8 GEMM" in int8
    assert not re.search("ELMo|token encoder|character CNN|LSTM", bert), int8
    code, bert, _ = _run(capsys, "info", own_tiny_bert_dir, "--json")
    int8 = json.loads(bert)["inference"][2]
    assert code == 0 and int8["precision"] == "int8"
    assert int8["kept_precision"] is None and int8["int8_library"] is None
    code, elmo, _ = _run(capsys, "info", own_tiny_dir)
    int8 = next(line for line in elmo.splitlines() if line.lstrip().startswith("int8:"))
    assert code == 0 and f"; its character CNN in {kept} (" in int8
    assert ("LSTMs: fbgemm" in int8) == ("avx512f" not in flags), int8
