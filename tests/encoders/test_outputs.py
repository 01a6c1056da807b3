"""One vocabulary for choosing layers and pooling: the enums of ``encoders/outputs.py`` are what
Python, the CLI and the HTTP API accept, and a spelling means the same as its enum member."""

from __future__ import annotations

import argparse
import typing

import numpy as np
import pytest

from contextvec.encoders.outputs import (
    LAYER_MODES,
    POOL_MODES,
    Layers,
    Pooling,
    as_layers,
    as_pooling,
    pool_tokens,
    select_layers,
    view_layers,
)

LAYERS = np.arange(3 * 4 * 2, dtype=np.float32).reshape(3, 4, 2)  # (num_layers, tokens, dim)


def test_a_spelling_and_its_member_give_the_same_array():
    for mode in Layers:
        want = select_layers(LAYERS, mode)
        assert select_layers(LAYERS, mode.value).tobytes() == want.tobytes()
        for pool in Pooling:
            assert view_layers(LAYERS, mode.value, pool.value).tobytes() \
                == pool_tokens(want, pool).tobytes()
    assert select_layers(LAYERS, Layers.TOP).shape == (4, 2)
    np.testing.assert_array_equal(select_layers(LAYERS, "average"), LAYERS.mean(0))
    np.testing.assert_array_equal(view_layers(LAYERS, Layers.ALL, Pooling.FIRST), LAYERS[:, 0])
    assert view_layers(LAYERS, "all", None) is LAYERS


def test_unknown_values_are_refused_naming_the_choices():
    assert as_layers("top") is Layers.TOP and as_pooling(None) is None
    with pytest.raises(ValueError, match="layers must be one of all, top, average, not 'last'"):
        as_layers("last")
    with pytest.raises(ValueError, match="pool must be one of mean, max, first or None, not 'sum'"):
        as_pooling("sum")
    with pytest.raises(ValueError, match="pool must be one of"):
        pool_tokens(LAYERS, None)


def test_the_cli_and_the_http_api_take_the_same_spellings():
    from contextvec.cli.embed import add_parser
    from contextvec.server.schemas import LayerMode, PoolMode

    assert LAYER_MODES == ("all", "top", "average") and POOL_MODES == ("mean", "max", "first")
    assert typing.get_args(LayerMode) == LAYER_MODES and typing.get_args(PoolMode) == POOL_MODES
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    for mode in Layers:
        for pool in Pooling:
            args = parser.parse_args(["embed", "in.txt", "out.h5", f"--{mode.value}", "--pool", pool.value])
            assert (as_layers(args.layers), as_pooling(args.pool)) == (mode, pool)
    with pytest.raises(SystemExit):
        parser.parse_args(["embed", "in.txt", "out.h5", "--all", "--pool", "sum"])
