"""How vectors are stored in HDF5: ``float32`` is allennlp's layout; ``float16`` is a native HDF5
type every reader opens as it is; ``bfloat16`` has no HDF5 type, so a dataset holds its bits as
``uint16`` (the upper half of the float32, rounded to nearest even) with the attribute
``contextvec_dtype = "bfloat16"``; :func:`contextvec.io.hdf5_vectors.read_vectors` turns it back
into float32 exactly.
Compression is one of h5py's filters, after the byte shuffle filter (bytes of equal rank side by
side compress better): ``gzip`` opens in any HDF5 reader, ``lzf`` (faster, larger) needs h5py or
its filter plugin. Each dataset is one chunk, so reading a sentence reads one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

from contextvec.choices import checked_choice, spellings

if TYPE_CHECKING:  # h5py loads with the writers, not with the command's options
    import h5py

DTYPE_ATTRIBUTE = "contextvec_dtype"
"""A dataset's attribute naming a dtype HDF5 has no type for (``bfloat16``)."""


class VectorDtype(StrEnum):
    """The dtype vectors are stored in: ``embed --dtype`` (``BulkSettings.dtype``) and the
    feature cache's ``--feature-dtype`` (``FeatureSettings.dtype``), one vocabulary."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    """float32's range with 8 bits of mantissa; stored as uint16 bits with an attribute."""


class Compression(StrEnum):
    """The HDF5 filter each dataset is written through (``--compression``)."""

    NONE = "none"
    GZIP = "gzip"
    LZF = "lzf"


DTYPES = spellings(VectorDtype)
COMPRESSIONS = spellings(Compression)
GZIP_LEVELS = range(1, 10)
DEFAULT_GZIP_LEVEL = 1
"""gzip's level when none is given: the measured knee of bytes against write speed
(docs/results/embed-storage.md)."""


@dataclass(frozen=True)
class VectorStorage:
    """How each dataset is written: ``dtype``, ``compression`` and, for gzip only, ``gzip_level``
    (1-9; None: :data:`DEFAULT_GZIP_LEVEL`). Strings are accepted and checked once, here.

    Raises:
        ValueError: a dtype or compression that is none of its choices, a level outside 1-9,
            or a level with a compression other than gzip.
    """

    dtype: VectorDtype = VectorDtype.FLOAT32
    compression: Compression = Compression.NONE
    gzip_level: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", checked_choice(VectorDtype, self.dtype, "dtype"))
        object.__setattr__(self, "compression", checked_choice(Compression, self.compression, "compression"))
        level = self.gzip_level
        if level is not None and self.compression is not Compression.GZIP:
            raise ValueError(f"gzip_level is for compression gzip, not {self.compression.value}")
        if level is not None and (isinstance(level, bool) or level not in GZIP_LEVELS):
            raise ValueError(f"gzip_level must be an integer from 1 to 9, not {level!r}")
        if self.compression is Compression.GZIP and level is None:
            object.__setattr__(self, "gzip_level", DEFAULT_GZIP_LEVEL)

    def record(self) -> dict[str, str | int]:
        """What a resume must find unchanged, as plain JSON values; empty for float32 without
        compression, so those runs record what runs before these options recorded."""
        record: dict[str, str | int] = {}
        if self.dtype is not VectorDtype.FLOAT32:
            record["dtype"] = self.dtype.value
        if self.compression is not Compression.NONE:
            record["compression"] = self.compression.value
        if self.gzip_level is not None:
            record["gzip_level"] = self.gzip_level
        return record

    def encode(self, array: np.ndarray) -> np.ndarray:
        """A float32 array in its stored form (bfloat16: the uint16 bits)."""
        if self.dtype is VectorDtype.BFLOAT16:
            return bfloat16_bits(array)
        return array.astype(self.dtype.value, copy=False)

    def values(self, array: np.ndarray) -> np.ndarray:
        """What reading ``array`` back after writing it gives: float32 or float16 as stored,
        bfloat16 as float32 holding the rounded values."""
        stored = self.encode(array)
        return bfloat16_values(stored) if self.dtype is VectorDtype.BFLOAT16 else stored

    def create(self, group: h5py.Group, name: str, stored: np.ndarray) -> h5py.Dataset:
        """Dataset ``name`` in ``group`` holding ``stored`` (made by :meth:`encode`)."""
        options: dict = {}
        if self.compression is not Compression.NONE:
            options = {"compression": self.compression.value, "compression_opts": self.gzip_level,
                       "shuffle": True, "chunks": stored.shape if stored.size else True}
        dataset = group.create_dataset(name, data=stored, **options)
        if self.dtype is VectorDtype.BFLOAT16:
            dataset.attrs[DTYPE_ATTRIBUTE] = self.dtype.value
        return dataset


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """float32 -> the bits of the nearest bfloat16 (ties to even; a NaN stays a quiet NaN), as
    uint16 of the same shape: torch's ``.to(torch.bfloat16)``, done in numpy so that no torch
    thread pool starts beside the engine's."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    rounded = rounded.astype(np.uint16)
    rounded[np.isnan(array)] = 0x7FC0
    return rounded


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bits -> float32 of the same shape, exactly those values."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
