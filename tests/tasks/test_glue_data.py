"""GLUE's data on the frozen-feature path: the TSV reader (real files and malformed ones), the
task table's GLUE entries, and the GLUE metrics against hand-computed values."""

from __future__ import annotations

import gzip
from collections import Counter

import pytest
from conftest import SHARED

from contextvec.tasks.metrics import correlation_scores, f1_scores, mcc_scores
from contextvec.tasks.readers import GLUE_FORMATS, read_glue
from contextvec.tasks.spec import get_task
from contextvec.tasks.split import Split

GLUE = SHARED / "tasks" / "glue"


# ---------------------------------------------------------------- the real files


SLOW = pytest.mark.slow  # every sentence through the moses tokenizer: seconds


@pytest.mark.parametrize(("task", "folder", "count", "counts"), [
    pytest.param("cola", "CoLA", 8551, {"1": 6023, "0": 2528}, marks=SLOW),
    ("mrpc", "MRPC", 3668, {"1": 2474, "0": 1194}),
    pytest.param("rte", "RTE", 2490, {"entailment": 1249, "not_entailment": 1241}, marks=SLOW),
    pytest.param("stsb", "STS-B", 5749, None, marks=SLOW),
    ("wnli", "WNLI", 635, None),
    ("sst2-glue", "SST-2", 67349, None),
])
def test_train_files_read_with_the_counts_of_the_readme(task, folder, count, counts):
    data = read_glue(task, GLUE / folder / "train.tsv.gz")
    assert len(data) == count and data.labeled and data.pair == GLUE_FORMATS[task].pair
    assert len(set(data.ids)) == count  # one id per item
    if counts is not None:
        assert Counter(data.labels) == counts
    if task == "stsb":
        assert all(isinstance(s, float) and 0 <= s <= 5 for s in data.labels)
        assert data.labels[:2] == [5.0, 3.8] and data.ids[:2] == ["0", "1"]


def test_text_is_tokenized_as_elmo_saw_it_and_tokenized_text_is_kept():
    cola = read_glue("cola", GLUE / "CoLA" / "train.tsv.gz", max_sentences=1)
    assert cola.sentences[0][:5] == ["Our", "friends", "won", "'t", "buy"]  # moses splits raw text
    assert cola.sentences[0][-2:] == ["propose", "."] and cola.ids == ["0"]
    mrpc = read_glue("mrpc", GLUE / "MRPC" / "train.tsv.gz", max_sentences=2)  # tokenized already
    assert mrpc.sentences[1][:4] == ["Yucaipa", "owned", "Dominick", "'s"]
    assert mrpc.second[0][:3] == ["Referring", "to", "him"] and mrpc.labels == ["1", "0"]


@pytest.mark.parametrize(("task", "folder", "count", "first_id"), [
    ("cola", "CoLA", 1063, "0"), ("mrpc", "MRPC", 1725, "0"), ("stsb", "STS-B", 1379, "0"),
    ("wnli", "WNLI", 146, "0"),
])
def test_test_files_are_unlabeled_with_their_index_column(task, folder, count, first_id):
    data = get_task(task).load(GLUE / folder / "test.tsv.gz")
    assert len(data) == count and data.labels == [None] * count and not data.labeled
    assert data.ids[0] == first_id and data.ids[-1] == str(count - 1)
    assert data.pair == get_task(task).pair


def test_max_sentences_takes_the_first_items_after_the_header():
    data = read_glue("rte", GLUE / "RTE" / "train.tsv.gz", max_sentences=3)
    assert len(data) == 3 and data.ids == ["0", "1", "2"]
    assert data.labels == ["not_entailment", "entailment", "entailment"]


def test_carved_dev_keeps_second_sentences_and_ids():
    train, dev, test = get_task("stsb").load_splits(GLUE / "STS-B" / "train.tsv.gz", None, max_sentences=50)
    whole = read_glue("stsb", GLUE / "STS-B" / "train.tsv.gz", max_sentences=50)
    assert test is None and len(dev) == 5 and len(train) == 45
    by_id = {i: (a, b, s) for i, a, b, s in zip(whole.ids, whole.sentences, whole.second, whole.labels,
                                                strict=True)}
    for part in (train, dev):
        assert all(by_id[i] == (a, b, s) for i, a, b, s in zip(part.ids, part.sentences, part.second,
                                                                part.labels, strict=True))
    assert sorted(train.ids + dev.ids, key=int) == whole.ids


def test_an_unlabeled_file_is_refused_for_training(tmp_path):
    with pytest.raises(ValueError, match="has no labels .GLUE's test.tsv.*contextvec predict"):
        get_task("wnli").load_splits(GLUE / "WNLI" / "train.tsv.gz", GLUE / "WNLI" / "test.tsv.gz")


# ---------------------------------------------------------------- malformed files


def _tsv(tmp_path, text: str, name: str = "bad.tsv", gz: bool = False):
    path = tmp_path / (name + (".gz" if gz else ""))
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"


def _stsb_row(score: str, first: str = "A man sings.", second: str = "A man is singing.") -> str:
    return f"0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\t{first}\t{second}\t{score}\n"


@pytest.mark.parametrize(("task", "text", "message"), [
    ("rte", RTE_HEADER + "0\tA dog runs.\tAn animal moves.\n",
     r"line 2: 3 tab-separated columns, expected 4 \(index, sentence1, sentence2, label: GLUE's RTE train"),
    ("rte", RTE_HEADER + "0\tA dog runs.\tAn animal moves.\tentailment\textra\n",
     "line 2: 5 tab-separated columns, expected 4"),
    ("rte", RTE_HEADER + "0\tA dog runs.\tAn animal moves.\t\n",
     r"line 2: no label in column 4 \(label\); expected one of entailment, not_entailment"),
    ("rte", RTE_HEADER + "0\tA dog runs.\tAn animal moves.\tneutral\n",
     "line 2: unknown label 'neutral'; RTE's labels are entailment, not_entailment"),
    ("rte", RTE_HEADER + "0\tA dog runs.\t  \tentailment\n", r"line 2: empty sentence2 \(column 3\)"),
    ("stsb", STSB_HEADER + _stsb_row("5.000") + _stsb_row("5.2"),
     "line 3: score 5.2 is outside STS-B's range 0 to 5"),
    ("stsb", STSB_HEADER + _stsb_row("-0.5"), "line 2: score -0.5 is outside STS-B's range 0 to 5"),
    ("stsb", STSB_HEADER + _stsb_row("nan"), "line 2: score 'nan' is not a finite number"),
    ("stsb", STSB_HEADER + _stsb_row("high"), "line 2: score 'high' is not a number"),
    ("stsb", STSB_HEADER + _stsb_row(""), r"line 2: no label in column 10 \(score\); expected a score"),
    ("cola", "gj04\t1\t\tA sentence.\ngj04\tyes\t*\tAnother one.\n",
     "line 2: unknown label 'yes'; CoLA's labels are 0, 1"),
    ("cola", "gj04\t1\t\tA sentence.\ngj04\t1\tA sentence without its mark column.\n",
     r"line 2: 3 tab-separated columns, expected 4 \(source, label, original mark, sentence"),
    ("mrpc", "Quality\t#1 ID\t#2 String\n1\t2\t3\n",
     "line 1: not a header of GLUE's MRPC train.tsv or test.tsv"),
    ("mrpc", "", "no rows"),
    ("wnli", RTE_HEADER, "no items after the header"),
    ("sst2-glue", "index\tsentence\n0\t\n", r"line 2: empty sentence \(column 2\)"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_malformed_rows_are_one_line_naming_file_and_line(tmp_path, task, text, message, gz):
    path = _tsv(tmp_path, text, gz=gz)
    with pytest.raises(ValueError, match=message) as error:
        read_glue(task, path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_quote_characters_are_text_as_in_glues_loader(tmp_path):
    # A field opening with a quote would swallow the tab and the next line under csv's default
    # quoting; GLUE's loader (quotechar=None) keeps it as text, and so does the reader.
    path = _tsv(tmp_path, RTE_HEADER + '0\t"Quoted, he said.\tHe said "no".\tentailment\n'
                + '1\tA "tab\tand more.\tnot_entailment\n')
    data = read_glue("rte", path)
    assert data.labels == ["entailment", "not_entailment"]
    assert data.sentences[0] == ['"', "Quoted", ",", "he", "said", "."]
    assert data.second[0] == ["He", "said", '"', "no", '"', "."] and data.sentences[1] == ["A", '"', "tab"]


def test_a_bom_before_the_header_is_dropped(tmp_path):
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    data = read_glue("mrpc", _tsv(tmp_path, header + "1\t1\t2\tA b .\tC d .\n"))
    assert data.sentences == [["A", "b", "."]] and data.second == [["C", "d", "."]] and data.ids == ["0"]


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes(RTE_HEADER.encode() + "0\tCaf\xe9.\tA caf\xe9.\tentailment\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"line 2: not UTF-8 text \(byte 0xe9\); expected GLUE's RTE"):
        read_glue("rte", path)


# ---------------------------------------------------------------- metrics and the task table


def test_mcc_against_the_formula():
    gold = ["1", "1", "1", "0", "0", "1"]
    predicted = ["1", "0", "1", "0", "1", "1"]  # tp 3, fn 1, tn 1, fp 1
    expected = (3 * 1 - 1 * 1) / ((3 + 1) * (3 + 1) * (1 + 1) * (1 + 1)) ** 0.5
    scores = mcc_scores(gold, predicted)
    assert scores["mcc"] == pytest.approx(expected, abs=1e-12) and scores["accuracy"] == pytest.approx(4 / 6)


def test_f1_is_of_the_positive_class():
    gold = ["1", "1", "0", "0", "1"]
    predicted = ["1", "0", "1", "0", "1"]  # positive "1": tp 2, fp 1, fn 1
    assert f1_scores(gold, predicted, "1")["f1"] == pytest.approx(2 / 3, abs=1e-12)
    assert f1_scores(gold, predicted, "0")["f1"] == pytest.approx(1 / 2, abs=1e-12)  # tp 1, fp 1, fn 1
    assert f1_scores(gold, predicted, "1")["accuracy"] == pytest.approx(3 / 5)


def test_correlations_against_hand_computed_values():
    gold, predicted = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    scores = correlation_scores(gold, predicted)
    # Pearson: both centred to (-1.5, -0.5, 0.5, 1.5) / (-1.5, 0.5, -0.5, 1.5): 4 / 5;
    # Spearman: the ranks are the values themselves, so the same.
    assert scores["pearson"] == pytest.approx(0.8, abs=1e-12)
    assert scores["spearman"] == pytest.approx(0.8, abs=1e-12)
    # Monotone but not linear: Spearman 1, Pearson below.
    curved = correlation_scores([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 4.0, 8.0])
    assert curved["spearman"] == pytest.approx(1.0) and curved["pearson"] < 0.99
    assert correlation_scores([1.0, 2.0, 3.0], [2.5, 2.5, 2.5]) == {"pearson": 0.0, "spearman": 0.0,
                                                                     "sentences": 3}


@pytest.mark.parametrize(("task", "metric", "keys"), [
    ("cola", "mcc", {"mcc", "accuracy"}), ("sst2-glue", "accuracy", {"accuracy"}),
    ("mrpc", "f1", {"f1", "accuracy"}), ("rte", "accuracy", {"accuracy"}),
    ("stsb", "spearman", {"pearson", "spearman"}), ("wnli", "accuracy", {"accuracy"}),
])
def test_each_glue_task_scores_its_metrics(task, metric, keys):
    spec = get_task(task)
    regression = task == "stsb"
    gold: list = [1.0, 2.5, 4.0] if regression else list(GLUE_FORMATS[task].labels) * 2
    predicted = gold[::-1]
    split = Split([["a"]] * len(gold), gold, second=[["b"]] * len(gold) if spec.pair else None)
    scores = spec.score(split, predicted)
    assert spec.metric == metric and keys <= set(scores) and 0 <= abs(scores[metric]) <= 1
    assert spec.carves_dev and spec.regression == regression
    assert spec.label_set(gold) == ([] if regression else sorted(set(gold)))
    with pytest.raises(ValueError, match="no labels to score"):
        spec.score(Split([["a"]], [None]), ["x"])


def test_your_own_pairs_take_any_class_names_and_moses_tokens(tmp_path):
    path = _tsv(tmp_path, "sentence1\tsentence2\tlabel\n"
                          "The cat sat.\tA cat was sitting.\tsame\n"
                          "It's late.\tThe sun rises.\tdifferent\n")
    split = get_task("pairs").load(path)
    assert split.pair and split.labels == ["same", "different"] and split.ids == ["0", "1"]
    assert split.sentences[1] == ["It", "'s", "late", "."]
    assert get_task("pairs").label_set(split.labels) == ["different", "same"]


def test_your_own_pair_scores_take_any_finite_number(tmp_path):
    path = _tsv(tmp_path, "sentence1\tsentence2\tscore\nA man sings.\tA man is singing.\t-1.5\n"
                          "A dog runs.\tA cat sleeps.\t12\n")
    split = get_task("pair-scores").load(path)
    assert split.labels == [-1.5, 12.0] and get_task("pair-scores").regression
    bad = _tsv(tmp_path, "sentence1\tsentence2\tscore\nA man sings.\tA man is singing.\tnan\n", "nan.tsv")
    with pytest.raises(ValueError, match=r"nan.tsv, line 2: score 'nan' is not a finite number"):
        get_task("pair-scores").load(bad)


def test_your_own_pairs_name_their_layout_in_errors(tmp_path):
    path = _tsv(tmp_path, "sentence1\tsentence2\tlabel\nOnly one sentence.\tsame\n")
    with pytest.raises(ValueError, match=r"line 2: 2 tab-separated columns, expected 3 .*a pairs TSV train"):
        get_task("pairs").load(path)
    unlabeled = _tsv(tmp_path, "index\tsentence1\tsentence2\n7\tThe cat sat.\tA cat sat.\n", "test.tsv")
    split = get_task("pairs").load(unlabeled)
    assert split.ids == ["7"] and split.labels == [None]
