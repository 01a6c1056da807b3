"""``contextvec.load(precision=...)``: bf16/int8 weights for ELMo and BERT, the CPU checks, and
fp32 unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tolerance import BF16_EPS, assert_reordered_close, elmo_terms
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import contextvec
from contextvec.encoders import cpu as cpu_module
from contextvec.encoders import precision as precision_module
from contextvec.encoders.cpu import cpu_flags
from contextvec.encoders.precision import (
    Int8Library,
    LowPrecisionLinear,
    LowPrecisionWeight,
    PackedFloatWeights,
    apply_precision,
    check_precision,
    run_linear,
)

FBGEMM_OP = "quantized::linear_with_input_q_dq_qweight_dq_output_fp32"
"""The profiler's name for fbgemm's int8 kernel of few rows."""
DYNAMIC_OP = "quantized::linear_dynamic"
"""The profiler's name for fbgemm's dynamic int8 kernel (ELMo's LSTMs on AVX2 without VNNI)."""
ONEDNN_KINDS = ["bf16", "int8"] if precision_module._onednn_bf16() else ["int8"]
"""The lower precisions whose products run on oneDNN here: bf16's only where oneDNN runs bf16
(elsewhere contextvec refuses bf16, and ``torch.mm`` emulates it where asked to)."""

SENTENCES = [
    line.split()
    for line in (
        "The quick brown fox jumps over the lazy dog .",
        "Representations from a biLM vary with context .",
        "Short",
        "Colorless green ideas sleep furiously , said Chomsky in 1957 .",
    )
]


def pretend_cpu(monkeypatch, flags: set[str]) -> None:
    """contextvec sees a CPU of ``flags``, its oneDNN uncapped: an ``ONEDNN_MAX_CPU_ISA`` in the
    environment (as when measuring another CPU class) is part of the CPU contextvec sees, and
    would narrow the pretended one. (oneDNN's own kernels stay capped: they read the cap once.)"""
    monkeypatch.setattr(cpu_module, "cpu_flags", lambda: frozenset(flags))
    for name in cpu_module.ISA_CAP_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bf16_cpu(monkeypatch):
    """Pretend the CPU has native bf16 (the kernels run anywhere; only the check reads flags), as
    every such CPU does, beside AVX-512 (without VNNI: int8 at 7 bits, on oneDNN)."""
    pretend_cpu(monkeypatch, {"avx2", "avx512f", "avx512bw", "avx512_bf16"})


@pytest.fixture
def no_bf16_cpu(monkeypatch):
    pretend_cpu(monkeypatch, {"avx2", "fma"})


@pytest.fixture(params=["detected", "7-bit", "avx2"])
def int8_cpu(request, monkeypatch):
    """int8 activations get 8 bits on a CPU with VNNI or AMX and 7 without: this CPU's width,
    7 bits as on a CPU without VNNI, and an AVX2 CPU's path (7 bits, LSTMs on fbgemm); each
    valid on any CPU. Returns the int8 path."""
    if request.param == "7-bit":
        monkeypatch.setattr(precision_module, "native_int8", lambda: False)
    if request.param == "avx2":
        pretend_cpu(monkeypatch, {"avx2", "fma"})
    return cpu_module.inference_paths()["int8"]


def cosines(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """Cosine per layer and token, (layers, tokens)."""
    x, y = np.concatenate(a, axis=1), np.concatenate(b, axis=1)
    return (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)


@pytest.mark.parametrize("variable", cpu_module.ISA_CAP_VARIABLES)
def test_int8_activations_follow_onednns_isa_cap(monkeypatch, variable):
    """oneDNN capped below VNNI saturates 8-bit activations, whatever the CPU has."""
    vnni = frozenset({"avx2", "avx512_vnni"})
    for name in cpu_module.ISA_CAP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert precision_module.inference_paths(vnni, int8_exact=True)["int8"].activation_bits == 8
    monkeypatch.setenv(variable, "avx2")
    assert precision_module.inference_paths(vnni, int8_exact=True)["int8"].activation_bits == 7
    monkeypatch.setenv(variable, "AVX512_CORE_VNNI")
    assert precision_module.inference_paths(vnni, int8_exact=True)["int8"].activation_bits == 8


def test_cpu_flags_parse_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16 amx_int8\n\nflags\t: other\n")
    assert cpu_flags.__wrapped__(str(info)) == {"fpu", "avx2", "avx512_bf16", "amx_int8"}
    assert cpu_flags.__wrapped__(str(tmp_path / "absent")) == frozenset()


def test_check_precision_errors(no_bf16_cpu):
    assert check_precision("fp32") == "fp32" and check_precision("int8") == "int8"
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, not 'fp16'"):
        check_precision("fp16")
    with pytest.raises(ValueError, match="no native bf16") as error:
        check_precision("bf16")
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="int8 runs on the CPU only"):
        check_precision("int8", "meta")


def test_bf16_refused_without_native_bf16(no_bf16_cpu, own_tiny_dir):
    with pytest.raises(ValueError, match="avx512_bf16"):
        contextvec.load(own_tiny_dir, precision="bf16")


def test_bf16_accepted_with_native_bf16(bf16_cpu):
    assert check_precision("bf16") == "bf16"


# bf16: inputs and weights rounded to 8 bits (2**-8 each), their products' errors of mixed signs
# summed: about BF16_EPS of the output's magnitude; a summation order may flip the result's
# own rounding (2**-8 more). int8: a step is 1/127 of a row's largest weight and 1/63 of its
# largest input (7-bit activations, CPUs without VNNI); half a step each, summed over 48
# products of mixed signs, stays near 2% of the output's magnitude. The inputs are seeded and
# the roundings the same on every CPU: only float32 summation orders differ between CPUs.
LOW_PRECISION_ERROR = {"bf16": 1.5 * BF16_EPS, "int8": 0.05}


# Each lower precision with each library of its kernels (bf16: oneDNN's alone).
KINDS = pytest.mark.parametrize(
    "kind,library",
    [("bf16", Int8Library.ONEDNN), ("int8", Int8Library.ONEDNN), ("int8", Int8Library.FBGEMM)],
    ids=["bf16", "int8", "int8-fbgemm"],
)


@KINDS
def test_low_precision_weight_matches_matmul(kind, library, int8_cpu):
    weight = torch.randn(37, 48)
    weight[3] = 0  # an all-zero row
    x = torch.randn(2, 5, 48)
    packed = LowPrecisionWeight(weight, kind, library)
    out = packed(x)
    assert out.shape == (2, 5, 37) and out.dtype == torch.float32
    expected = x @ weight.T
    error = (out - expected).abs().max() / expected.abs().max()
    assert error < LOW_PRECISION_ERROR[kind]
    assert torch.all(out[..., 3] == 0)
    assert packed(torch.zeros(0, 48)).shape == (0, 37)


@KINDS
def test_low_precision_weight_adds_a_tensor_to_its_product(kind, library, int8_cpu):
    """An LSTM's gates: the state's product plus the input projections (bf16: summed inside
    oneDNN's product; bf16 input projections accepted)."""
    weight, bias = torch.randn(64, 48), torch.randn(64)
    x, add = torch.randn(5, 48), torch.randn(5, 64)
    packed = LowPrecisionWeight(weight, kind, library)
    expected = x @ weight.T + bias + add
    for other in (add, add.bfloat16()):
        out = packed(x, bias, add=other)
        assert out.dtype == torch.float32
        error = (out - expected).abs().max() / expected.abs().max()
        assert error < LOW_PRECISION_ERROR[kind] + (BF16_EPS if other.dtype == torch.bfloat16 else 0)
    with pytest.raises(ValueError, match="add and gelu"):
        packed(x, add=add, gelu="tanh")


def test_fbgemm_adds_bias_and_gelu_after_its_product():
    weight, bias = torch.randn(64, 48), torch.randn(64)
    x, add = torch.randn(3, 5, 48), torch.randn(3, 5, 64)
    packed = LowPrecisionWeight(weight, "int8", Int8Library.FBGEMM)
    product = packed(x)
    assert torch.equal(packed(x, bias, add=add), product + (add + bias))
    assert torch.equal(packed(x, bias, gelu="tanh"), F.gelu(product + bias, approximate="tanh"))


def test_int8_row_scales_keep_a_row_independent_of_its_batch():
    """oneDNN quantizes each row with its own scale: a row's product is the same beside a row a
    hundred times larger. fbgemm quantizes the whole input with one scale, so beside that row
    the small one's steps are coarser and its error larger (docs/precision.md)."""
    weight, small = torch.randn(64, 48), torch.randn(1, 48)
    batch = torch.cat([small, 100 * torch.randn(1, 48)])
    exact = small @ weight.T
    onednn = LowPrecisionWeight(weight, "int8", Int8Library.ONEDNN)
    # One row alone may run on fbgemm's kernel: the same integer sums, one float32 rounding each.
    assert_reordered_close(onednn(small), onednn(batch)[:1], terms=1)
    fbgemm = LowPrecisionWeight(weight, "int8", Int8Library.FBGEMM)
    alone, beside = ((fbgemm(x)[:1] - exact).abs().max() for x in (small, batch))
    assert beside > 10 * alone


def test_int8_few_rows_give_the_result_of_their_batch():
    """A product of few rows runs on the CPU's few-rows kernel (fbgemm's where it sums the codes
    exactly): the same codes and integer sums as oneDNN's for the same rows in a larger batch, so
    the same result up to one float32 rounding; with ``add`` and ``bias`` too, and through
    :meth:`LowPrecisionWeight.kernel`."""
    torch.manual_seed(0)
    weight, bias = torch.randn(300, 70), torch.randn(300)
    rows = cpu_module.FEW_ROWS + 4
    x, add = 5 * torch.randn(rows, 70), torch.randn(rows, 300)
    packed = LowPrecisionWeight(weight, "int8")
    batch = packed(x, bias, add=add)
    for block in (slice(0, 1), slice(3, 4), slice(2, 7), slice(0, cpu_module.FEW_ROWS)):
        assert_reordered_close(packed(x[block], bias, add=add[block]), batch[block], terms=1)
        assert_reordered_close(packed.kernel()(x[block], add[block] + bias), batch[block], terms=1)
    # Codes just below halfway between two levels (a row scale of 1/8) round down on both kernels
    # (fbgemm would round x + zero point, where the sum in float32 lands on the half).
    half = packed.levels // 2
    codes = torch.randint(-30, 30, (rows, 69)) + (0.5 - 2**-18)
    near = torch.cat([torch.full((rows, 1), half / 8), codes / 8], 1)
    assert_reordered_close(packed(near[:1], bias), packed(near, bias)[:1], terms=1)
    # As many rows as this CPU hands fbgemm run on its kernel; one more row does not.
    path = cpu_module.inference_paths()["int8"]
    for rows, expected in ((path.few_rows or 1, path.few_rows_library is Int8Library.FBGEMM),
                           ((path.few_rows or 1) + 1, False)):
        with torch.profiler.profile() as profile:
            packed(x[:rows], bias)
        assert (FBGEMM_OP in {event.key for event in profile.key_averages()}) is expected, rows
    zero = packed(torch.zeros(1, 70), bias)  # the first LSTM step's state
    assert torch.equal(zero, bias.expand(1, -1))
    with pytest.raises(ValueError, match="runs int8, not bf16"):
        LowPrecisionWeight(weight, "bf16").kernel()


def test_int8_elmo_runs_a_lone_sentences_steps_on_its_paths_kernels(int8_cpu, own_tiny_dir):
    """Each LSTM step of a sentence embedded alone is a product of one row, and its input
    projections one of a few. Where the LSTMs run on oneDNN and fbgemm sums few rows exactly,
    those run on fbgemm's kernel of few rows, and the vectors are those of the same sentence in a
    batch whose every product has more rows. Where the LSTMs run on fbgemm's dynamic kernel (AVX2
    without int8 dot products), every product does, alone or batched, with one activation scale
    per product: there a sentence's vectors move with its batch, within int8's error."""
    dynamic = int8_cpu.int8_library is Int8Library.FBGEMM
    few_rows = not dynamic and int8_cpu.few_rows_library is Int8Library.FBGEMM
    encoder = contextvec.load(own_tiny_dir, precision="int8")
    with torch.profiler.profile() as profile:
        alone = encoder.embed([SENTENCES[0]])[0]
    names = {event.key for event in profile.key_averages()}
    assert (FBGEMM_OP in names, DYNAMIC_OP in names) == (few_rows, dynamic), int8_cpu
    # Sentences of one length, more than a few, with no token in common (repeats would be
    # projected once): every step has that many rows, none on the kernel of few rows.
    batch = [SENTENCES[0], *([f"{word}{i}" for word in SENTENCES[0]] for i in range(cpu_module.FEW_ROWS))]
    with torch.profiler.profile() as profile:
        together = encoder.embed(batch)[0]
    names = {event.key for event in profile.key_averages()}
    assert (FBGEMM_OP in names, DYNAMIC_OP in names) == (False, dynamic), int8_cpu
    if dynamic:
        assert cosines([alone], [together]).min() > 0.99
    else:
        assert_reordered_close(alone, together, terms=elmo_terms(encoder.config))


def test_linear_bias_stays_float(int8_cpu):
    linear = nn.Linear(16, 8)
    packed = LowPrecisionLinear(linear, "int8")
    assert packed.bias.dtype == torch.float32 and torch.equal(packed.bias, linear.bias.detach())
    x = torch.randn(4, 16)
    expected = linear(x)
    assert ((packed(x) - expected).abs().max() / expected.abs().max()) < LOW_PRECISION_ERROR["int8"]


def test_fp32_is_untouched_and_exact(own_tiny_dir):
    reference = contextvec.load(own_tiny_dir)
    fp32 = contextvec.load(own_tiny_dir, precision="fp32")
    assert not hasattr(fp32, "precision")
    for a, b in zip(reference.embed(SENTENCES), fp32.embed(SENTENCES), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("kind", ["bf16", "int8"])
def test_elmo_low_precision_close_to_fp32(kind, bf16_cpu, small_dir):
    reference = contextvec.load(small_dir).embed(SENTENCES)
    encoder = contextvec.load(small_dir, precision=kind)
    assert encoder.precision == kind
    names = set(encoder.state_dict())
    # No float matrix is left: LSTMs, char-CNN filters, highway and projection are packed.
    assert not any(name.endswith(("input_weight", "state_weight", "projection")) for name in names)
    assert not any("convolutions" in name and name.endswith("weight") for name in names)
    assert not any(isinstance(m, nn.Linear) for m in encoder.modules())
    out = encoder.embed(SENTENCES)
    assert all(o.dtype == np.float32 and o.shape == r.shape for o, r in zip(out, reference, strict=True))
    cos = cosines(reference, out)
    # (The int8 bounds hold with 7-bit activations too, as on CPUs without VNNI.)
    assert cos.min() > (0.999 if kind == "bf16" else 0.99), cos.min(axis=1)
    # A sentence's vectors do not depend on its batch in any precision. int8: each row has its own
    # activation scale and the integer sums are exact, so only float32 work may sum in another
    # order. bf16: a kernel may accumulate other row counts in another float32 order, which can
    # flip a product's rounding to bf16: at most one BF16_EPS of the magnitude per rounding on
    # the way (filters, highway's two, projection; three per LSTM layer).
    alone = encoder.embed([SENTENCES[2]])[0]
    if kind == "int8":
        assert_reordered_close(alone, out[2], terms=elmo_terms(encoder.config))
    else:
        roundings = 2 + 2 * encoder.config.n_highway + 3 * encoder.config.n_layers
        assert_reordered_close(alone, out[2], terms=roundings, eps=BF16_EPS)


@pytest.mark.parametrize("kind", ["bf16", "int8"])
def test_bert_low_precision_close_to_fp32(kind, bf16_cpu, minilm_dir):
    reference = contextvec.load(minilm_dir).embed(SENTENCES)
    encoder = contextvec.load(minilm_dir, precision=kind)
    assert not any(isinstance(m, nn.Linear) for m in encoder.modules())
    cos = cosines(reference, encoder.embed(SENTENCES))
    assert cos.min() > (0.99 if kind == "bf16" else 0.9), cos.min(axis=1)


def test_low_precision_encoder_cannot_be_saved(own_tiny_dir, tmp_path):
    encoder = contextvec.load(own_tiny_dir, precision="int8")
    with pytest.raises(ValueError, match="cannot save a int8 encoder"):
        contextvec.save(encoder, tmp_path / "out")


def test_apply_precision_rejects_unknown_name():
    with pytest.raises(ValueError, match="precision must be one of"):
        apply_precision(nn.Linear(2, 2), "int4", check_cpu=False)


@pytest.mark.parametrize("projection", [True, False])
def test_packed_lstm_layer_matches_float(projection, int8_cpu):
    from contextvec.encoders.bilm import ProjectedLSTMLayer

    dim = 24 if projection else 32
    layer = ProjectedLSTMLayer(16, 32, dim, cell_clip=3.0, proj_clip=3.0, projection=projection).eval()
    inputs = torch.randn(2, 3, 5, 16)
    lengths = torch.tensor([5, 4, 2])
    state = (torch.randn(2, 3, dim), torch.randn(2, 3, 32))
    with torch.no_grad():
        expected, (h, c) = layer(inputs, lengths, state)
        apply_precision(layer, "int8")
        assert layer.input_weight is None and set(layer.packed) == (
            {"input_weight", "state_weight", "projection"} if projection else {"input_weight", "state_weight"}
        )
        libraries = {m.int8_library for m in layer.packed.modules() if isinstance(m, LowPrecisionWeight)}
        assert libraries == {cpu_module.inference_paths()["int8"].int8_library}
        out, (h8, c8) = layer(inputs, lengths, state)
    for low, full in ((out, expected), (c8, c)):  # five steps, each feeding the next its error
        assert ((low - full).abs().max() / full.abs().max()) < LOW_PRECISION_ERROR["int8"]
    assert torch.all(out[:, 2, 2:] == 0)  # steps past a sequence's end stay uncomputed


def test_fingerprint_tells_precisions_apart(own_tiny_dir, bf16_cpu):
    from contextvec.encoders.fingerprint import model_identity

    identities = {p: model_identity(contextvec.load(own_tiny_dir, precision=p))
                  for p in ("fp32", "bf16", "int8")}
    assert len(set(identities.values())) == 3
    assert identities["int8"] == model_identity(contextvec.load(own_tiny_dir, precision="int8"))


@pytest.fixture
def pack_all(monkeypatch):
    """Pack matrices of any size (the tests' are far below ``PackedFloatWeights.min_size``)."""
    monkeypatch.setattr(PackedFloatWeights, "min_size", 0)


def test_small_matrices_times_few_rows_stay_on_f_linear():
    small, large = torch.zeros(512, 512), torch.zeros(PackedFloatWeights.min_size // 512, 512)
    with torch.no_grad():
        assert not PackedFloatWeights.usable(small, 32)
        assert PackedFloatWeights.usable(small, PackedFloatWeights.min_rows)
        assert PackedFloatWeights.usable(large, 1)
    assert not PackedFloatWeights.usable(large, 1)  # with gradients: never


def test_packed_float_weights_match_linear_and_follow_weight_changes(pack_all):
    torch.manual_seed(0)
    linear = nn.Linear(48, 40)
    packing = PackedFloatWeights()
    x = torch.randn(7, 48)
    with torch.no_grad():
        assert PackedFloatWeights.usable(linear.weight, 7)
        # oneDNN's kernel and MKL's sum the 48 products in their own orders.
        assert_reordered_close(packing.linear("w", x, linear.weight, linear.bias), linear(x), terms=48)
        assert_reordered_close(packing.linear("w", x[:1], linear.weight), x[:1] @ linear.weight.T,
                               terms=48)
        linear.weight.mul_(2.0)  # an in-place update (optimizer step, load_state_dict) repacks
        assert_reordered_close(packing.linear("w", x, linear.weight, linear.bias), linear(x), terms=48)
    # With gradients it is F.linear itself: the gradient reaches the weight.
    assert not PackedFloatWeights.usable(linear.weight, 7)
    packing.linear("w", x, linear.weight, linear.bias).sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


def test_transposed_copies_are_contiguous_in_inference_and_follow_the_weights():
    weights = torch.randn(2, 6, 4, requires_grad=True)
    packing = PackedFloatWeights()
    assert packing.transposed("w", weights)._base is weights  # with gradients: the view
    with torch.no_grad():
        copy = packing.transposed("w", weights)
        assert copy.is_contiguous() and torch.equal(copy, weights.transpose(1, 2))
        assert packing.transposed("w", weights) is copy  # kept
        weights.mul_(2.0)  # an in-place update makes it again
        assert torch.equal(packing.transposed("w", weights), weights.transpose(1, 2))


def test_copies_of_views_of_inference_weights_are_kept():
    """Weights made under ``torch.inference_mode`` (a model built there) have views without a
    base; each call's fresh view of them still finds the copy made at the first call."""
    with torch.inference_mode():
        weights = torch.randn(2, 6, 4)
        packing = PackedFloatWeights()
        copy = packing.transposed("w", weights[0:1])
        assert packing.transposed("w", weights[0:1]) is copy
        assert packing.transposed("w", weights[1:2]) is not copy  # another matrix: made again
        assert torch.equal(packing.transposed("w", weights[1:2]), weights[1:2].transpose(1, 2))


def test_packed_float_weights_copy_and_pickle_empty(pack_all):
    import copy
    import pickle

    packing = PackedFloatWeights()
    with torch.no_grad():
        packing.linear("w", torch.randn(2, 4), torch.randn(3, 4))
    assert len(packing) == 1
    assert len(copy.deepcopy(packing)) == 0 and len(pickle.loads(pickle.dumps(packing))) == 0


@pytest.fixture
def packed_calls(pack_all, monkeypatch):
    """The names of the packed matrices ``PackedFloatWeights.packed_linear`` multiplies by, call
    by call (every matrix packed)."""
    calls, packed_linear = [], PackedFloatWeights.packed_linear

    def counted(self, name, *args, **kwargs):
        calls.append(name)
        return packed_linear(self, name, *args, **kwargs)

    monkeypatch.setattr(PackedFloatWeights, "packed_linear", counted)
    return calls


@pytest.mark.parametrize("projection", [True, False])
def test_lstm_inference_path_matches_gradient_path(projection, packed_calls):
    """The oneDNN inference path (no gradients) and the bmm training path give the same outputs."""
    from contextvec.encoders.bilm import ProjectedLSTMLayer

    torch.manual_seed(0)
    dim = 24 if projection else 32
    layer = ProjectedLSTMLayer(16, 32, dim, cell_clip=3.0, proj_clip=3.0, projection=projection).eval()
    inputs = torch.randn(2, 3, 5, 16)
    lengths = torch.tensor([5, 4, 2])
    state = (torch.randn(2, 3, dim), torch.randn(2, 3, 32))
    trained, (h, c) = layer(inputs, lengths, state)
    with torch.no_grad():
        # One direction's whole sequence, then the other's (each its own products), against
        # both directions in one bmm per step.
        inferred, (h0, c0) = layer(inputs, lengths, state)
    assert packed_calls  # the inference path ran on packed weights
    # Other kernels, other orders: per step, the gates sum 16 inputs and at most 32 state
    # values, the projection 32 cells.
    for got, want in ((inferred, trained), (h0, h), (c0, c)):
        assert_reordered_close(got, want, terms=16 + 32 + 32)
    assert torch.all(inferred[:, 2, 2:] == 0)


def test_lstm_omitted_state_skips_the_first_state_product(packed_calls):
    """Without an initial state the first step multiplies no state (a zero state adds exactly
    nothing): each direction's state matrix runs once per step after the first, and outputs,
    final states and gradients are those of an explicit zero state."""
    from contextvec.encoders.bilm import ProjectedLSTMLayer

    calls = packed_calls
    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(16, 32, 24, cell_clip=3.0, proj_clip=3.0)
    inputs, lengths = torch.randn(2, 3, 5, 16), torch.tensor([5, 4, 2])
    zeros = (torch.zeros(2, 3, 24), torch.zeros(2, 3, 32))
    with torch.no_grad():
        omitted, omitted_final = layer(inputs, lengths)
        assert calls.count("state_weight.0") == calls.count("state_weight.1") == 4
        calls.clear()
        explicit, explicit_final = layer(inputs, lengths, zeros)
        assert calls.count("state_weight.0") == 5
    assert torch.equal(omitted, explicit)
    assert all(map(torch.equal, omitted_final, explicit_final))
    grads = []
    for state in (None, zeros):
        layer.zero_grad()
        out, _ = layer(inputs, lengths, state)
        out.square().sum().backward()
        grads.append([p.grad.clone() for p in (layer.input_weight, layer.state_weight, layer.bias)])
    for omitted_grad, explicit_grad in zip(*grads, strict=True):
        torch.testing.assert_close(omitted_grad, explicit_grad, rtol=0, atol=0)


@pytest.mark.parametrize("clip", [0.5, None])
@pytest.mark.parametrize("projection", [True, False])
def test_lstm_inference_cell_matches_the_differentiable_cell(projection, clip):
    """Without gradients the cell runs in fewer ops (one sigmoid over all gates, tanh through
    it): the same outputs and final states as with gradients, clips and biases included."""
    from contextvec.encoders.bilm import ProjectedLSTMLayer

    torch.manual_seed(1)
    dim = 24 if projection else 32
    layer = ProjectedLSTMLayer(16, 32, dim, cell_clip=clip, proj_clip=clip, projection=projection).eval()
    layer.bias.data.normal_()
    inputs = torch.randn(2, 2, 6, 16) * 3  # large enough to reach the clips
    lengths = torch.tensor([6, 3])  # (uneven: a plain layer would otherwise run torch's kernel)
    trained, (h, c) = layer(inputs, lengths)
    with torch.no_grad():
        inferred, (h0, c0) = layer(inputs, lengths)
    # The same products; the gates' functions in other ops (each within a few units in the last
    # place) feed the next step's sums: per step 16 inputs, at most 32 state values, 32 cells.
    for got, want in ((inferred, trained), (h0, h), (c0, c)):
        assert_reordered_close(got, want, terms=16 + 32 + 32)
    if clip:
        assert float(c0.abs().max()) == clip  # the cell clip was exercised


def test_bf16_packed_layout_gives_the_plain_bf16_products():
    """On a CPU with native bf16 through oneDNN's packed layout, elsewhere through ``mm``: the
    same products either way."""
    weight, x = torch.randn(37, 48), torch.randn(5, 48)
    packed = LowPrecisionWeight(weight, "bf16")
    expected = torch.mm(x.to(torch.bfloat16), weight.to(torch.bfloat16).T).float()
    # The same bf16 operands; the two kernels may accumulate the 48 float32 products in other
    # orders, which can flip the rounding of a sum to bf16: equal, or one bf16 step apart.
    torch.testing.assert_close(packed(x), expected, rtol=BF16_EPS, atol=0)


def test_packed_float_weights_follow_a_replaced_weight_and_fuse_gelu(pack_all):
    torch.manual_seed(0)
    packing, x = PackedFloatWeights(), torch.randn(6, 16)
    with torch.no_grad():
        for _ in range(3):  # a new tensor each time, perhaps at a freed one's address
            weight = torch.randn(24, 16)
            assert_reordered_close(packing.linear("w", x, weight), x @ weight.T, terms=16)
        bias = torch.randn(24)
        for form in ("none", "tanh"):
            # (oneDNN's GELU is its own approximation, a few units in the last place of |x|.)
            expected = torch.nn.functional.gelu(x @ weight.T + bias, approximate=form)
            assert_reordered_close(packing.linear("w", x, weight, bias, gelu=form), expected, terms=16)


def test_packed_float_weights_pad_long_inputs_to_few_row_counts(pack_all):
    """Past ``row_bucket`` rows the product runs on a padded row count (oneDNN keeps memory per
    row count seen): eight counts per doubling, at most an eighth of the rows padding, and the
    padding never shows, with ``add`` as without."""
    counts = {PackedFloatWeights.padded_rows(rows) for rows in range(1, 4097)}
    assert len(counts) == PackedFloatWeights.row_bucket + 8 * 6  # 1-64 as they are, 65-4096 in 6 doublings
    for rows in range(1, 4097):
        padded = PackedFloatWeights.padded_rows(rows)
        assert rows <= padded <= rows + rows // 8
    torch.manual_seed(0)
    weight, bias = torch.randn(24, 16), torch.randn(24)
    packing = PackedFloatWeights()
    for rows in (5, 128, 129, 2 * 128 + 37):
        x, add = torch.randn(rows, 16), torch.randn(rows, 24)
        with torch.no_grad():
            out = packing.linear("w", x, weight, bias, gelu="tanh")
            summed = packing.packed_linear("w", x, weight, bias, add=add)
        expected = x @ weight.T + bias
        assert out.shape == summed.shape == expected.shape
        assert_reordered_close(out, torch.nn.functional.gelu(expected, approximate="tanh"), terms=16)
        assert_reordered_close(summed, expected + add, terms=17)
    with pytest.raises(ValueError, match="add and gelu"), torch.no_grad():
        packing.packed_linear("w", x, weight, bias, gelu="tanh", add=add)


class OneDnnRows(TorchDispatchMode):
    """The row counts of the oneDNN products run inside it (their inputs' leading sizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace in ("mkldnn", "onednn") and isinstance(args[0], torch.Tensor):
            self.rows.add(args[0].shape[:-1].numel())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind", ONEDNN_KINDS)
def test_low_precision_products_of_many_rows_run_on_few_row_counts(kind):
    """oneDNN keeps memory for every row count its products have run with (a server's memory grew
    with each new batch shape): past ``PackedFloatWeights.row_bucket`` rows a product runs on
    ``PackedFloatWeights.padded_rows`` rows, with and without ``add``, and the padding never
    shows: each row's result is the one it gets in a product of at most ``row_bucket`` rows."""
    torch.manual_seed(0)
    weight, bias = torch.randn(40, 24), torch.randn(40)
    packed = LowPrecisionWeight(weight, kind)
    block = PackedFloatWeights.row_bucket
    for shape in ((65, 24), (3, 50, 24), (2 * 128 + 37, 24)):
        x = torch.randn(shape)
        add = torch.randn(*shape[:-1], 40)
        with OneDnnRows() as seen:
            outs = [packed(x, bias), packed(x, bias, add=add)]
        rows = x.shape[:-1].numel()
        assert seen.rows == {PackedFloatWeights.padded_rows(rows)} != {rows}
        flat_x, flat_add = x.reshape(rows, 24), add.reshape(rows, 40)
        starts = range(0, rows, block)
        alone = [torch.cat([packed(flat_x[i : i + block], bias) for i in starts]),
                 torch.cat([packed(flat_x[i : i + block], bias, add=flat_add[i : i + block])
                            for i in starts])]
        for out, expected in zip(outs, alone, strict=True):
            assert out.shape == (*shape[:-1], 40)
            if kind == "int8":  # the same integer sums and scales
                assert_reordered_close(out.reshape(rows, 40), expected, terms=1)
            else:  # bf16 products of another row count: equal, or one bf16 step apart
                torch.testing.assert_close(out.reshape(rows, 40), expected, rtol=BF16_EPS, atol=0)


def test_bf16_bias_and_gelu_fused_into_the_product():
    """Bias and GELU go into the bf16 product (oneDNN) or follow it (``mm``): either way
    ``gelu(x @ W.T + b)`` of the bf16-rounded weights and inputs, to bf16's precision."""
    torch.manual_seed(0)
    linear, x = nn.Linear(48, 37), torch.randn(5, 48)
    low = LowPrecisionLinear(linear, "bf16")
    weight = linear.weight.detach().to(torch.bfloat16).float()
    inputs = x.to(torch.bfloat16).float()
    for form in (None, "none", "tanh"):
        expected = inputs @ weight.T + linear.bias.detach()
        expected = expected if form is None else nn.functional.gelu(expected, approximate=form)
        with torch.no_grad():
            got = run_linear(PackedFloatWeights(), "w", low, x, gelu=form)
        # The same bf16 operands: only the roundings to bf16 differ, of the product (``mm``) and of
        # the result (both), each at most BF16_EPS of the magnitude.
        assert_reordered_close(got, expected, terms=2, eps=BF16_EPS)
    assert not torch.allclose(run_linear(PackedFloatWeights(), "w", low, x, gelu="none"),
                              run_linear(PackedFloatWeights(), "w", low, x), atol=0.05)
