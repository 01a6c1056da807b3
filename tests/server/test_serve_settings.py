"""``contextvec serve``'s settings as Python builds them: the enums they take, what they refuse,
and the model id and warning the command derives from them."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="the server extra is not installed: pip install -e '.[server]'")

from contextvec.api import DEFAULT_MODEL, ModelSpec  # noqa: E402
from contextvec.encoders.outputs import Layers, Pooling  # noqa: E402
from contextvec.logs import LogLevel  # noqa: E402
from contextvec.server.explore import ExploreSettings  # noqa: E402
from contextvec.server.serve import ServerProcessSettings, default_model_name  # noqa: E402
from contextvec.server.settings import ServerSettings  # noqa: E402


def test_openai_choices_are_the_layer_and_pooling_enums():
    settings = ServerSettings(openai_layers="top", openai_pool="max")
    assert settings.openai_layers is Layers.TOP and settings.openai_pool is Pooling.MAX
    mixed = ServerSettings(openai_layers=[1.0, 0.0, -1.0])
    assert mixed.openai_layers == (1.0, 0.0, -1.0) and mixed.openai_pool is None
    with pytest.raises(ValueError, match="must be top, average or scalar-mix weights, not 'all'"):
        ServerSettings(openai_layers="all")
    with pytest.raises(ValueError, match="openai_pool must be one of mean, max, first or None, not 'sum'"):
        ServerSettings(openai_pool="sum")


@pytest.mark.parametrize(("explore", "model", "option"), [
    (ExploreSettings(corpus="corpus.txt"), None, "--explore-corpus"),
    (ExploreSettings(reports=("report.json",)), None, "--explore-report"),
    (ExploreSettings(), "elmo-en-small", "--explore-model"),
])
def test_explorer_settings_need_the_page(explore, model, option):
    with pytest.raises(ValueError, match=f"^{option} is for the explorer page, which --no-ui turns off$"):
        ServerProcessSettings(ui=False, explore=explore, explore_model=model)
    assert ServerProcessSettings(explore=explore, explore_model=model).ui


def test_serve_log_level_choices_are_the_enum(capsys):
    from contextvec.cli.main import build_parser

    parser = build_parser("serve")
    assert parser.parse_args(["serve", "--log-level", "debug"]).log_level == LogLevel.DEBUG
    assert ServerProcessSettings(log_level=parser.parse_args(["serve"]).log_level).log_level is LogLevel.INFO
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--log-level", "loud"])
    choices = ", ".join(f"'{level}'" for level in LogLevel)
    assert f"(choose from {choices})" in capsys.readouterr().err


def test_serve_settings_refuse_bad_values():
    assert ServerProcessSettings(log_level="warning").log_level is LogLevel.WARNING
    with pytest.raises(ValueError):
        ServerProcessSettings(log_level="loud")
    with pytest.raises(ValueError, match="port must be 0..65535, not 70000"):
        ServerProcessSettings(port=70000)
    with pytest.raises(ValueError, match="start_timeout must be > 0"):
        ServerProcessSettings(start_timeout=0)


@pytest.mark.parametrize(("host", "api_key", "unguarded"), [
    ("127.0.0.1", None, False), ("localhost", None, False), ("::1", None, False),
    ("0.0.0.0", None, True), ("0.0.0.0", "secret", False), ("::", None, True),
])
def test_listening_beyond_this_machine_without_a_key_is_unguarded(host, api_key, unguarded):
    assert ServerProcessSettings(host=host, server=ServerSettings(api_key=api_key)).unguarded is unguarded


def test_the_served_id_is_the_model_directory_name(tmp_path):
    assert default_model_name(ModelSpec(str(tmp_path / "my-bert"))) == "my-bert"
    bilm = ModelSpec(options_file=str(tmp_path / "run" / "options.json"),
                     weight_file=str(tmp_path / "run" / "weights.hdf5"))
    assert default_model_name(bilm) == "run"
    assert default_model_name(ModelSpec()) == DEFAULT_MODEL
