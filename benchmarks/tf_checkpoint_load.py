"""Loading a bilm-tf checkpoint against loading the ``weights.hdf5`` of the same model.

Builds one random biLM of the given size, writes it both ways into a temporary folder — the
HDF5 with contextvec's bilm-tf writer, the checkpoint as a TensorBundle whose variables carry
bilm-tf's training names, with an Adagrad slot beside each (as a training run saves them; the
softmax is left out) — then times ``contextvec.load`` of each, alternating, and prints the
medians. Both loads include building the model; the files are in the page cache after the first
round, so this compares the readers, not the disk.

    PYTHONPATH=src python benchmarks/tf_checkpoint_load.py                 # the published model
    PYTHONPATH=src python benchmarks/tf_checkpoint_load.py --preset small --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from bert_speed import cpu_name

import contextvec
from contextvec.encoders.bilm import BiLMConfig, ElmoBiLM
from contextvec.encoders.bilm.loader import save_bilm_tf
from contextvec.io.bilm_tf import read_options_json, read_weights, write_options_json
from contextvec.io.tf_checkpoint import CRC_CHECKED_BYTES, masked_crc32c
from contextvec.io.tf_elmo import dump_weights_name

PRESETS = {  # (filters, n_highway, projection_dim, lstm_dim)
    "published": (((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)), 2, 512, 4096),
    "small": (((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)), 1, 128, 1024),
}
MAGIC = 0xDB4775248B80FB57


def training_name(hdf5: str) -> str:
    """The checkpoint name bilm-tf's training gives the variable ``dump_weights`` calls ``hdf5``."""
    name = "lm/" + hdf5
    for ours, theirs in (("/RNN/MultiRNNCell/Cell", "/rnn/multi_rnn_cell/cell_"),
                         ("/LSTMCell/W_P_0", "/lstm_cell/projection/kernel"),
                         ("/LSTMCell/W_0", "/lstm_cell/kernel"), ("/LSTMCell/B", "/lstm_cell/bias")):
        name = name.replace(ours, theirs)
    assert dump_weights_name(name) == hdf5, (name, hdf5)
    return name


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def block(items: list[tuple[bytes, bytes]]) -> bytes:
    """An SSTable block without prefix sharing: one restart point."""
    body = b"".join(varint(0) + varint(len(k)) + varint(len(v)) + k + v for k, v in items)
    return body + (0).to_bytes(4, "little") + (1).to_bytes(4, "little")


def write_bundle(prefix: Path, arrays: dict[str, np.ndarray]) -> None:
    """A one-shard TensorBundle (TensorFlow's V2 checkpoint) of float32 arrays."""
    entries, offset = [], 0
    with open(f"{prefix}.data-00000-of-00001", "wb") as data:
        for name in sorted(arrays):
            raw = np.ascontiguousarray(arrays[name], dtype="<f4").tobytes()
            data.write(raw)
            # BundleEntryProto: dtype 1 (float), shape 2 (dims: field 2 {size: field 1}), offset 4,
            # size 5, crc32c 6
            dims = (b"\x08" + varint(n) for n in arrays[name].shape)
            shape = b"".join(b"\x12" + varint(len(d)) + d for d in dims)
            # the crc only where the reader checks it (in pure Python it is slow on large tensors)
            crc = masked_crc32c(raw) if len(raw) <= CRC_CHECKED_BYTES else 0
            entry = (b"\x08\x01\x12" + varint(len(shape)) + shape + b"\x20" + varint(offset)
                     + b"\x28" + varint(len(raw)) + b"\x35" + crc.to_bytes(4, "little"))
            entries.append((name.encode(), entry))
            offset += len(raw)
    header = (b"", b"\x08\x01\x1a\x02\x08\x01")  # num_shards 1, version {producer 1}
    table = bytearray()

    def put(contents: bytes) -> bytes:
        handle = varint(len(table)) + varint(len(contents))
        table.extend(contents + b"\x00" + masked_crc32c(contents + b"\x00").to_bytes(4, "little"))
        return handle

    data_handle = put(block([header, *entries]))
    meta_handle = put(block([]))
    index_handle = put(block([(entries[-1][0], data_handle)]))
    footer = meta_handle + index_handle
    table.extend(footer + b"\x00" * (40 - len(footer)) + MAGIC.to_bytes(8, "little"))
    Path(f"{prefix}.index").write_bytes(bytes(table))


def make_models(preset: str, root: Path) -> tuple[Path, Path]:
    filters, n_highway, projection_dim, lstm_dim = PRESETS[preset]
    config = BiLMConfig(filters=filters, n_highway=n_highway, projection_dim=projection_dim,
                        lstm_dim=lstm_dim)
    hdf5_dir, ckpt_dir = root / "hdf5", root / "checkpoint"
    hdf5_dir.mkdir()
    ckpt_dir.mkdir()
    save_bilm_tf(ElmoBiLM(config), hdf5_dir / "options.json", hdf5_dir / "weights.hdf5")
    write_options_json(read_options_json(hdf5_dir / "options.json"), ckpt_dir / "options.json")
    arrays = read_weights(hdf5_dir / "weights.hdf5", read_options_json(hdf5_dir / "options.json"))
    variables = {training_name(name): array for name, array in arrays.items()}
    variables.update({f"{name}/Adagrad": np.ones_like(array) for name, array in variables.items()})
    write_bundle(ckpt_dir / "model.ckpt-1", variables)
    (ckpt_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1"\n')
    return hdf5_dir, ckpt_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="published")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hdf5_dir, ckpt_dir = make_models(args.preset, Path(tmp))
        reference = contextvec.load(hdf5_dir).embed([["a", "check"]])[0]
        np.testing.assert_array_equal(contextvec.load(ckpt_dir).embed([["a", "check"]])[0], reference)
        times: dict[str, list[float]] = {"weights.hdf5": [], "checkpoint": []}
        for _ in range(args.rounds):
            for label, path in (("weights.hdf5", hdf5_dir), ("checkpoint", ckpt_dir)):
                start = time.perf_counter()
                contextvec.load(path)
                times[label].append(time.perf_counter() - start)
        size = sum(f.stat().st_size for f in hdf5_dir.iterdir()) / 2**20
    print(f"preset {args.preset} ({size:.0f} MiB of weights), {args.rounds} rounds, CPU {cpu_name()}")
    for label, values in times.items():
        print(f"  contextvec.load({label:12s}) median {statistics.median(values):.3f} s  "
              f"min {min(values):.3f} s")


if __name__ == "__main__":
    main()
