"""The version a user sees is the installed package's (pyproject.toml is its one source)."""

from __future__ import annotations

from importlib.metadata import version

import contextvec
from contextvec.cli.main import main


def test_version_is_the_installed_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"contextvec {version('contextvec')}\n"
    assert contextvec.__version__ == version("contextvec")


def test_import_and_version_import_no_torch():
    import subprocess
    import sys

    code = ("import sys, contextvec\nassert contextvec.__version__\n"
            "assert 'torch' not in sys.modules, 'torch imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
