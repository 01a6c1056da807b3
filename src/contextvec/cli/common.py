"""Arguments and helpers shared by several subcommands."""

from __future__ import annotations

import argparse

import torch

import contextvec
from contextvec.encoders.base import Encoder


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model (default: the bundled model)")
    group.add_argument(
        "--model", help="model directory: bilm-tf files, a contextvec model or an HF BERT model"
    )
    group.add_argument("--options-file", help="bilm-tf options.json (with --weight-file)")
    group.add_argument("--weight-file", help="bilm-tf weights.hdf5 (with --options-file)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda:0")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")


def load_model(args: argparse.Namespace) -> Encoder:
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model and (args.options_file or args.weight_file):
        raise ValueError("give either --model or --options-file/--weight-file, not both")
    return contextvec.load(
        args.model, options_file=args.options_file, weight_file=args.weight_file,
        device=args.device,
    )
