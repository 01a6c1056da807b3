"""Old names of renamed classes, importable with a ``DeprecationWarning`` for one version."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any


def renamed_names(module: str, namespace: Mapping[str, Any], renamed: Mapping[str, str],
                  until: str = "0.3.0") -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` (whose globals are ``namespace``): each old name of
    ``renamed`` warns, naming its new name, and gives the object of the new name; any other
    unknown name raises ``AttributeError`` as a module's would."""

    def __getattr__(name: str) -> Any:
        if name in renamed:
            warnings.warn(f"{module}.{name} is renamed {renamed[name]}; the old name goes in {until}",
                          DeprecationWarning, stacklevel=2)
            return namespace[renamed[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
