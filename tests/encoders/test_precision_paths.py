"""Each precision's inference path per CPU class (``contextvec.encoders.cpu.inference_paths``) and
``contextvec info`` reporting it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import contextvec
from contextvec.cli.main import main
from contextvec.encoders import cpu as cpu_module
from contextvec.encoders.cove import MTLSTM, MTLSTMConfig, save_cove_encoder
from contextvec.encoders.cpu import (
    FEW_ROWS,
    INT8_FLAGS,
    Int8Library,
    Kernel,
    cpu_flags,
    fbgemm_available,
    fbgemm_sums_exact,
    inference_paths,
    int8_sums_exact,
)
from contextvec.encoders.precision import LowPrecisionWeight

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}  # Zen 4, Ice Lake, Cooper Lake
AMX = AVX512 | {"amx_tile", "amx_bf16", "amx_int8"}  # Sapphire Rapids and later
PROCESS_CAP, PROCESS_INT8_EXACT = cpu_module.isa_cap(), int8_sums_exact()
"""oneDNN's ISA cap in this process's environment, and whether its int8 kernel sums 8-bit codes
exactly under it: both read before any test clears the cap, as oneDNN reads the cap at its first
use and keeps it whatever a test sets later."""


@pytest.fixture
def cove_dir(tmp_path):
    """A tiny CoVe model: a family that runs in fp32 only."""
    torch.manual_seed(0)
    words = ["the", "bank", "was", "."]
    return save_cove_encoder(MTLSTM(MTLSTMConfig(input_dim=6, hidden_size=4), words,
                                    torch.randn(len(words), 6)), tmp_path / "cove")


@pytest.fixture(autouse=True)
def no_isa_cap(monkeypatch):
    for name in cpu_module.ISA_CAP_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def summary(flags: frozenset[str], cap: str | None = None, exact: bool = True) -> dict:
    return {p.precision: (p.available, p.kernel, p.activation_bits)
            for p in inference_paths(flags, cap, int8_exact=exact).values()}


def test_amx_cpu_runs_bf16_and_int8_on_tiles():
    assert summary(AMX) == {"fp32": (True, Kernel.AVX512, None), "bf16": (True, Kernel.AMX, None),
                            "int8": (True, Kernel.AMX, 8)}
    assert "AMX tiles take no float32" in inference_paths(AMX, int8_exact=True)["fp32"].reason


def test_avx512_cpu_runs_bf16_and_vnni():
    assert summary(AVX512) == {"fp32": (True, Kernel.AVX512, None),
                               "bf16": (True, Kernel.AVX512_BF16, None),
                               "int8": (True, Kernel.AVX512_VNNI, 8)}
    # AVX-512 without BF16 or VNNI (Skylake-X): bf16 refused, int8 at 7 bits.
    skylake = AVX2 | {"avx512f", "avx512bw"}
    assert summary(skylake) == {"fp32": (True, Kernel.AVX512, None), "bf16": (False, Kernel.NONE, None),
                                "int8": (True, Kernel.AVX512, 7)}


def test_avx2_cpu_refuses_bf16_and_gives_int8_seven_bits():
    assert summary(AVX2) == {"fp32": (True, Kernel.AVX2, None), "bf16": (False, Kernel.NONE, None),
                             "int8": (True, Kernel.AVX2, 7)}
    assert "neither avx512_bf16 nor amx_bf16" in inference_paths(AVX2)["bf16"].reason
    # AVX-VNNI on AVX2 width (Alder Lake): 8 bits.
    assert summary(AVX2 | {"avx_vnni"})["int8"] == (True, Kernel.AVX_VNNI, 8)


def test_lstms_run_int8_on_fbgemm_where_onednn_has_only_avx2_kernels():
    def library(flags, cap=None, fbgemm=True):
        return inference_paths(flags, cap, int8_exact=True, fbgemm=fbgemm)["int8"].int8_library

    assert library(AVX2) is Int8Library.FBGEMM
    assert "LSTMs: fbgemm" in inference_paths(AVX2, fbgemm=True)["int8"].engine
    assert library(AMX, "AVX2") is Int8Library.FBGEMM
    assert library(AVX2, fbgemm=False) is Int8Library.ONEDNN  # a torch built without fbgemm
    for flags in (AVX2 | {"avx_vnni"}, AVX2 | {"avx512f", "avx512bw"}, AVX512, AMX):
        assert library(flags) is Int8Library.ONEDNN, flags
    assert library(AVX2, fbgemm=None) is (Int8Library.FBGEMM if fbgemm_available() else Int8Library.ONEDNN)


def test_few_rows_run_on_fbgemm_where_it_sums_exactly():
    def path(flags, fbgemm):
        return inference_paths(flags, int8_exact=True, fbgemm=fbgemm)["int8"]

    for flags, rows in ((AVX2, FEW_ROWS), (AVX2 | {"avx512f", "avx512bw"}, FEW_ROWS),
                        (AVX512, FEW_ROWS), (AMX, 1)):
        assert (path(flags, True).few_rows_library, path(flags, True).few_rows) == (
            Int8Library.FBGEMM, rows), flags
        assert (path(flags, False).few_rows_library, path(flags, False).few_rows) == (
            Int8Library.ONEDNN, 0), flags
    assert f"(up to {FEW_ROWS} rows: fbgemm)" in path(AVX512, True).engine
    assert "(one row: fbgemm)" in path(AMX, True).engine  # AMX's tiles: measured for one row only
    assert "rows" not in path(AMX, False).engine and "one row" not in path(AMX, False).engine
    assert "(LSTMs: fbgemm)" in path(AVX2, True).engine  # there every LSTM product is fbgemm's
    # This CPU's check, at the 8 bits that exact VNNI sums give.
    assert path(AMX, None).few_rows_library is (
        Int8Library.FBGEMM if fbgemm_sums_exact(8) else Int8Library.ONEDNN)


def test_fbgemm_few_rows_check_agrees_with_this_cpus_flags():
    """7-bit codes never saturate an int16 pair sum; 8-bit ones do without VNNI."""
    if not fbgemm_available():
        pytest.skip("this torch has no fbgemm")
    assert fbgemm_sums_exact(7)
    if "avx512_vnni" in cpu_flags() and not os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS"):
        assert fbgemm_sums_exact(8)
    if not any(flag in cpu_flags() for flag in INT8_FLAGS):
        assert not fbgemm_sums_exact(8)


def test_int8_elmo_on_an_avx2_cpu_runs_its_lstms_on_fbgemm(monkeypatch, own_tiny_dir):
    """Only the LSTMs' matrices: the token encoder stays fp32 (no bf16 there)."""
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AVX2)
    if not fbgemm_available():
        pytest.skip("this torch has no fbgemm")
    encoder = contextvec.load(own_tiny_dir, precision="int8")
    weights = {name: module.int8_library for name, module in encoder.named_modules()
               if isinstance(module, LowPrecisionWeight)}
    assert weights and set(weights.values()) == {Int8Library.FBGEMM}
    assert all(".layers." in f".{name}" for name in weights)
    sentences = [["A", "short", "sentence", "."], ["Another", "one", ",", "a", "little", "longer", "."]]
    reference = contextvec.load(own_tiny_dir).embed(sentences)
    for low, full in zip(encoder.embed(sentences), reference, strict=True):
        cos = (low * full).sum(-1) / np.linalg.norm(low, axis=-1) / np.linalg.norm(full, axis=-1)
        assert cos.min() > 0.99, cos


def test_int8_bert_stays_on_onednn_on_an_avx2_cpu(monkeypatch, own_tiny_bert_dir):
    """BERT's hidden states differ too much in size between tokens for one scale per product."""
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AVX2)
    if not fbgemm_available():
        pytest.skip("this torch has no fbgemm")
    assert inference_paths()["int8"].int8_library is Int8Library.FBGEMM  # what an LSTM would get
    encoder = contextvec.load(own_tiny_bert_dir, precision="int8")
    libraries = {m.int8_library for m in encoder.modules() if isinstance(m, LowPrecisionWeight)}
    assert libraries == {Int8Library.ONEDNN}


def test_isa_cap_narrows_the_path():
    assert summary(AMX, "avx512_core_vnni") == {"fp32": (True, Kernel.AVX512, None),
                                                "bf16": (False, Kernel.NONE, None),
                                                "int8": (True, Kernel.AVX512_VNNI, 8)}
    assert summary(AMX, "AVX512_CORE_BF16")["bf16"] == (True, Kernel.AVX512_BF16, None)
    assert summary(AMX, "AVX2")["int8"] == (True, Kernel.AVX2, 7)
    assert "oneDNN capped at AVX2" in inference_paths(AMX, "avx2")["bf16"].reason
    assert summary(AMX, "ALL") == summary(AMX)


def test_int8_kernel_that_is_not_exact_gets_seven_bits():
    int8 = inference_paths(AMX, int8_exact=False)["int8"]
    assert (int8.kernel, int8.activation_bits) == (Kernel.AMX, 7)
    assert "not exact" in int8.reason


def test_int8_kernel_check_agrees_with_this_cpus_flags():
    """oneDNN's int8 sums of saturating 8-bit codes are exact exactly where the CPU has VNNI/AMX
    and oneDNN's ISA cap allows them."""
    kernel = inference_paths(cpu_flags(), PROCESS_CAP, int8_exact=True)["int8"].kernel
    assert (kernel in (Kernel.AMX, Kernel.AVX512_VNNI, Kernel.AVX_VNNI)) == PROCESS_INT8_EXACT


def test_bf16_refusal_gives_the_paths_reason(monkeypatch, own_tiny_dir):
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AVX512)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    with pytest.raises(ValueError, match="precision bf16: this CPU has no native bf16 .oneDNN capped"):
        contextvec.load(own_tiny_dir, precision="bf16")


def test_info_reports_each_precisions_path(monkeypatch, capsys, own_tiny_dir, cove_dir):
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AVX2)
    assert main(["info", str(own_tiny_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("inference:"))
    rows = (line.split(":", 1) for line in lines[start + 1 : start + 4])
    shown = {name.strip(): value.strip() for name, value in rows}
    assert shown["fp32"].startswith("AVX2, via oneDNN")
    assert shown["bf16"].startswith("refused: no native bf16")
    assert shown["int8"].startswith("AVX2, 7-bit activations, via oneDNN int8 GEMM")
    assert ("(LSTMs: fbgemm)" in shown["int8"]) is fbgemm_available()
    assert lines[-1].startswith("fingerprint:")

    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AMX)
    assert main(["info", str(own_tiny_dir), "--json"]) == 0
    paths = {p["precision"]: p for p in json.loads(capsys.readouterr().out)["inference"]}
    assert [paths[p]["kernel"] for p in ("fp32", "bf16", "int8")] == ["AVX-512", "AMX tiles", "AMX tiles"]
    assert paths["bf16"]["available"]
    assert paths["int8"]["activation_bits"] == (8 if int8_sums_exact() else 7)

    assert main(["info", str(cove_dir), "--json"]) == 0
    paths = {p["precision"]: p for p in json.loads(capsys.readouterr().out)["inference"]}
    assert paths["fp32"]["available"] and not paths["int8"]["available"]
    assert "runs in fp32 only" in paths["int8"]["reason"]


@pytest.mark.parametrize("bf16", [True, False])
def test_int8_keeps_elmos_token_encoder_in_bf16_or_fp32(bf16, monkeypatch, own_tiny_dir):
    """int8 rounds the LSTMs' matrices; the token encoder, whose rounding the LSTMs amplify
    most, stays in bf16 where the CPU has it, else in fp32."""
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: AVX512 if bf16 else AVX2)
    assert inference_paths()["int8"].kept_precision == ("bf16" if bf16 else "fp32")
    encoder = contextvec.load(own_tiny_dir, precision="int8")
    weights = {name: t.dtype for name, t in encoder.state_dict().items()
               if name.endswith("weight") and "embedding" not in name}
    token = {dtype for name, dtype in weights.items() if "token_encoder" in name}
    lstm = {dtype for name, dtype in weights.items() if "token_encoder" not in name}
    assert token == {torch.bfloat16 if bf16 else torch.float32} and lstm == {torch.int8}
    reference = contextvec.load(own_tiny_dir).embed([["A", "short", "sentence", "."]])
    out = encoder.embed([["A", "short", "sentence", "."]])
    # The token layer (layer 0) carries bf16's rounding, or none: int8's is in the LSTM layers.
    assert np.array_equal(out[0][0], reference[0][0]) is not bf16
