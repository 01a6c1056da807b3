"""``contextvec.load``: any supported model path -> an :class:`~contextvec.encoders.Encoder`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from contextvec.encoders.base import Encoder
from contextvec.encoders.cpu import InferencePath, Kernel, inference_paths
from contextvec.encoders.family import Family, Form
from contextvec.encoders.fingerprint import model_identity
from contextvec.encoders.precision import (
    PRECISIONS,
    Int8Role,
    PacksWeights,
    Precision,
    apply_precision,
    as_precision,
    check_precision,
    precision_of,
)
from contextvec.encoders.registry import load_files, refuse_conversion, refuse_shadowed, writer
from contextvec.encoders.threads import in_passing_thread
from contextvec.io.hf_bert import is_hf_bert_dir
from contextvec.io.native import cast_weights
from contextvec.resolve import (
    DEFAULT_MODEL,
    ModelNotFoundError,
    bundled_models,
    family_at,
    model_path,
    resolve_model,
    verified,
)

__all__ = [
    "DEFAULT_MODEL",
    "STORED_DTYPES",
    "Conversion",
    "PRECISIONS",
    "ModelInfo",
    "Precision",
    "ModelNotFoundError",
    "ModelSpec",
    "bundled_models",
    "check_device",
    "convert",
    "is_hf_bert_dir",
    "load",
    "model_info",
    "resolve_model",
    "save",
]


def check_device(device: str | torch.device) -> torch.device:
    """The device, or a one-line ``ValueError`` for a name torch does not know or a device this
    build of torch cannot use (``cuda`` on a CPU-only torch)."""
    try:
        device = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"unknown device {str(device)!r}: use cpu, cuda or cuda:N ({e})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: this torch has no usable CUDA device; use --device cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device}: MPS is not available here; use --device cpu")
    return device


def load(
    model: str | os.PathLike | None = None,
    *,
    options_file: str | os.PathLike | None = None,
    weight_file: str | os.PathLike | None = None,
    device: str | torch.device = "cpu",
    precision: Precision | str = Precision.FP32,
) -> Encoder:
    """Load an encoder, ready for ``embed()`` (eval mode).

    The loading runs on a thread of its own that ends before this returns, so that the model
    runs at full speed from whichever one thread embeds with it (see
    `contextvec.encoders.threads`).

    A published model's files are hashed on a thread of their own while it loads, and compared
    with the checksums its pull recorded before this returns (docs/models.md).

    Args:
        model: None for the bundled default model ([`DEFAULT_MODEL`][contextvec.api.DEFAULT_MODEL]),
            the name of a bundled model, the name of a published model pulled into the cache
            (``contextvec pull NAME``; docs/models.md), or a directory holding one of:
            bilm-tf files (``options.json`` + ``weights.hdf5``);
            a bilm-tf training checkpoint (``options.json`` + ``checkpoint`` +
            ``model.ckpt-N.index``/``.data-*``) or a TF-Hub ELMo module (``variables/`` beside
            ``tfhub_module.pb`` or ``saved_model.pb``), read without TensorFlow;
            a contextvec model (``config.json`` + ``model.safetensors``);
            a Hugging Face BERT model (``config.json`` of model_type "bert" +
            ``model.safetensors`` or ``pytorch_model.bin``, with ``tokenizer.json`` or
            ``vocab.txt``);
            a CoVe model (contextvec directory of model_type "cove" or "cove-seq2seq", with its
            word vectors);
            an ELMoForManyLangs model (its ``config.json`` + architecture JSON, ``char.dic``,
            ``word.dic``, ``token_embedder.pkl``, ``encoder.pkl``; docs/elmo-formats.md).
        options_file: bilm-tf's ``options.json``, given with ``weight_file`` instead of ``model``.
        weight_file: bilm-tf's ``weights.hdf5``, given with ``options_file``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``.
        precision: a [`Precision`][contextvec.encoders.precision.Precision] or its spelling:
            ``"fp32"`` (default, the weights as stored), ``"bf16"`` or ``"int8"``: the
            weight matrices of ELMo (char-CNN, highway, LSTMs, projections) and BERT (every
            linear layer) stored in that precision for inference; activations and outputs stay
            float32 (see `contextvec.encoders.precision`; accuracy in docs/precision.md). CoVe
            and ELMoForManyLangs models run in fp32 only.

    Returns:
        The encoder, in eval mode on ``device``; its ``embed`` gives float32 arrays
        ``(num_layers, tokens, output_dim)``.

    Raises:
        ModelNotFoundError: nothing at ``model``, a directory that is no model, the bundled
            model missing from the installation, or a published model not pulled yet (the
            message says which ``contextvec pull`` to run: loading never downloads).
        CorruptModelError: a pulled model's file differs from the one downloaded (a
            ``ValueError``; no model is returned).
        ValueError: an unknown or unavailable device; ``options_file`` without ``weight_file``
            (or the reverse); ``"bf16"`` on a CPU without native bf16; a low precision for CoVe.
    """
    device = check_device(device)
    check_precision(precision, device)
    if options_file is not None or weight_file is not None:
        if options_file is None or weight_file is None:
            raise ValueError("options_file and weight_file go together")
        return in_passing_thread(lambda: apply_precision(
            load_files(options_file, weight_file, device), precision))
    path, pulled = model_path(model)
    with verified(pulled):
        family = family_at(path)
        if precision != "fp32" and not family.low_precision:
            raise ValueError(f"precision {precision}: {family.kind} runs in fp32 only")
        return in_passing_thread(lambda: apply_precision(family.load(path, device), precision))


@dataclass(frozen=True)
class ModelInfo:
    """What a model directory holds, as [`model_info`][contextvec.api.model_info] reads it."""

    path: Path
    format: str
    """The files' format, e.g. "bilm-tf/allennlp HDF5 (options.json + weights.hdf5)"."""
    family: str
    """The registry family that loads it (``bilm-tf``, ``elmo-bilm``, ``elmoformanylangs``, ...)."""
    kind: str
    """The model in words ("an ELMoForManyLangs model")."""
    num_layers: int
    output_dim: int
    parameters: int
    """Number of weights (every element of the state dict)."""
    fingerprint: str
    """[`model_identity`][contextvec.encoders.fingerprint.model_identity]: what resumed jobs,
    caches and saved task models compare (the same for a model and its native conversion)."""
    facts: tuple[tuple[str, str], ...]
    """Family-specific facts (vocabulary sizes, characters, LSTM sizes) as (name, value) pairs."""
    inference: tuple[InferencePath, ...] = ()
    """How each precision would run this model on this CPU: which instructions, and why
    ([`inference_paths`][contextvec.encoders.cpu.inference_paths]; unavailable where the CPU or
    the model's family refuses it)."""


def model_info(model: str | os.PathLike | None = None) -> ModelInfo:
    """Load ``model`` (as [`load`][contextvec.api.load] does, on the CPU) and describe it.

    Raises:
        ModelNotFoundError: as for ``load``.
        ValueError: a malformed model (the one-line error of its format).
    """
    path, pulled = model_path(model)
    with verified(pulled):
        family = family_at(path)
        encoder = in_passing_thread(lambda: family.load(path, torch.device("cpu")))
    facts = family.facts(encoder) if family.facts is not None else {}
    return ModelInfo(
        path=path, format=family.format or family.name, family=family.name, kind=family.kind,
        num_layers=encoder.num_layers, output_dim=encoder.output_dim,
        parameters=sum(t.numel() for t in encoder.state_dict().values()),
        fingerprint=model_identity(encoder), facts=tuple(facts.items()),
        inference=tuple(_model_paths(family, encoder)),
    )


# encoders/cpu.py's words for the LSTMs' int8 library, in an int8 path's reason.
_LSTM_CLAUSE = re.compile(r"; LSTMs on [^;]*")


def _int8_for(path: InferencePath, encoder: Encoder) -> InferencePath:
    """The CPU's int8 path in words that hold for ``encoder``: the path names the modules int8
    treats apart (a character CNN left in ``kept_precision``, LSTMs on ``int8_library``), which
    only some families have; a model without them gets None for those fields."""
    modules = list(encoder.modules())
    engine, reason = path.engine.partition("; ")[0], path.reason  # "; ..." names ELMo's token encoder
    kept, library = path.kept_precision, path.int8_library
    roles = {m.int8_role for m in modules if isinstance(m, PacksWeights)}
    if Int8Role.RECURRENT not in roles:
        engine, reason = engine.replace(f" (LSTMs: {library})", ""), _LSTM_CLAUSE.sub("", reason)
        library = None
    if Int8Role.KEPT in roles:
        engine += f"; its character CNN in {kept}"
    else:
        kept = None
    return replace(path, engine=engine, reason=reason, kept_precision=kept, int8_library=library)


def _model_paths(family: Family, encoder: Encoder) -> list[InferencePath]:
    """This CPU's path per precision for this model: the lower ones refused for a family that runs
    in fp32 only, int8's words about ELMo's parts kept for a model that has them."""
    paths = [_int8_for(path, encoder) if path.precision == "int8" and path.available else path
             for path in inference_paths().values()]
    if family.low_precision:
        return paths
    return [path if path.precision == "fp32" else
            replace(path, available=False, kernel=Kernel.NONE, engine="", activation_bits=None,
                    int8_library=None, few_rows_library=None, few_rows=None,
                    reason=f"{family.kind} runs in fp32 only")
            for path in paths]


def save(encoder: Encoder, directory: str | os.PathLike) -> Path:
    """Save an encoder in contextvec's native format (``config.json`` + ``model.safetensors``).

    Args:
        encoder: an fp32 encoder, as [`load`][contextvec.api.load] returns it.
        directory: where to write; created if missing. `load(directory)` reads it back.

    Returns:
        The directory written.

    Raises:
        ValueError: a bf16 or int8 encoder (its rounded weights are not the model).
        TypeError: an encoder of a family contextvec cannot save.
    """
    return _write(encoder, Path(directory), Form.NATIVE)


def _write(encoder: Encoder, directory: Path, form: Form) -> Path:
    """Write ``encoder`` in ``form`` by its family's writer (``Family.writes``)."""
    precision = precision_of(encoder)
    if precision != "fp32":
        raise ValueError(f"cannot save a {precision} encoder: load the model in fp32 to save it")
    write = writer(encoder, form)
    if write is None:
        raise TypeError(f"cannot save {type(encoder).__name__} yet")
    return write(encoder, directory)


def _absolute(path: str | None) -> str | None:
    """Workers may run in another folder: an existing relative path is made absolute here."""
    if path is None or not Path(path).exists():
        return path  # a bundled model's name, or a path only the workers' nodes have
    return str(Path(path).resolve())


@dataclass(frozen=True)
class ModelSpec:
    """What to load, as names and paths (never a loaded model): [`load`][contextvec.api.load]'s
    arguments plus the torch threads of the process that loads it. The CLI's model options
    (``--model``, ``--options-file``/``--weight-file``, ``--device``, ``--threads``,
    ``--precision``) and each Ray worker load through one.

    Attributes:
        model: a bundled model's name or a model directory (None: the bundled default).
        options_file: bilm-tf's ``options.json``, with ``weight_file`` instead of ``model``.
        weight_file: bilm-tf's ``weights.hdf5``, with ``options_file``.
        device: a torch device name.
        threads: torch CPU threads of the loading process; None: torch's choice (a Ray worker
            gets 1).
        precision: the weight precision of inference.

    Raises:
        ValueError: both ``model`` and bilm-tf files, fewer than one thread, an unknown precision.
    """

    model: str | None = None
    options_file: str | None = None
    weight_file: str | None = None
    device: str = "cpu"
    threads: int | None = 1
    precision: Precision = Precision.FP32

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", as_precision(self.precision))
        if self.model and (self.options_file or self.weight_file):
            raise ValueError("give either --model or --options-file/--weight-file, not both")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, not {self.threads}")

    def resolved(self) -> ModelSpec:
        """The spec a worker loads: local relative paths made absolute and at least one thread
        set (call on the driver)."""
        return ModelSpec(_absolute(self.model), _absolute(self.options_file),
                         _absolute(self.weight_file), self.device, self.threads or 1, self.precision)

    @property
    def gpus(self) -> int:
        """GPUs one worker asks Ray for."""
        return 1 if self.device.startswith("cuda") else 0

    def load(self) -> Encoder:
        """The encoder, with torch limited to :attr:`threads` threads in this process (if set)."""
        if self.threads:
            torch.set_num_threads(self.threads)
        return load(self.model, options_file=self.options_file, weight_file=self.weight_file,
                    device=self.device, precision=self.precision)


STORED_DTYPES = {"float32": torch.float32, "float16": torch.float16}
"""The dtypes [`convert`][contextvec.api.convert] stores native weights in, by name."""


@dataclass(frozen=True)
class Conversion:
    """What [`convert`][contextvec.api.convert] writes, checked when made: before anything is
    loaded or written (``contextvec convert``'s options of the same names).

    Attributes:
        model: the model to convert.
        to: the [`Form`][contextvec.encoders.family.Form] to write, or its spelling.
        dtype: a name in [`STORED_DTYPES`][contextvec.api.STORED_DTYPES]: the weights' dtype in
            the native form (float16 halves the files and loads into float32 parameters).

    Raises:
        ValueError: a model of a family without a ``to`` form (one line saying why, or what
            converts); an unknown form or dtype; a dtype other than float32 for bilm-tf files.
    """

    model: ModelSpec
    to: Form = Form.NATIVE
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "to", Form(self.to))
        if self.model.model is not None:  # else bilm-tf files, or the bundled default: an ELMo
            refuse_conversion(resolve_model(self.model.model), self.to, self.model.model)
        if self.dtype not in STORED_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(STORED_DTYPES)}, not {self.dtype!r}")
        if self.dtype != "float32" and self.to != Form.NATIVE:
            raise ValueError("--dtype applies to --to native (bilm-tf files are float32)")


def convert(conversion: Conversion, directory: str | os.PathLike) -> Path:
    """Load ``conversion.model`` and write it to ``directory`` in ``conversion.to`` form.

    Returns:
        The directory written: ``load(directory)`` gives the same vectors.

    Raises:
        FileExistsError: a native model asked for in a directory of bilm-tf files (which
            ``load`` would read first).
        ModelNotFoundError: as for [`load`][contextvec.api.load].
        ValueError: a ``conversion.model`` of a precision other than fp32 (as for
            [`save`][contextvec.api.save]).
    """
    out = Path(directory)
    refuse_shadowed(out, conversion.to)
    _write(conversion.model.load(), out, conversion.to)
    if conversion.dtype != "float32":
        cast_weights(out, STORED_DTYPES[conversion.dtype])
    return out
