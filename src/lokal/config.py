"""model.yaml: a default ``model:`` section, named ``models:`` profiles, generation settings.

The file has the same shape as the original scripts' config::

    model:            # the default profile; every named profile inherits from it
      backend: llamacpp
      model_path: bundled:smollm2-135m
    generation:       # defaults for every profile
      max_new_tokens: 512
      temperature: 0
    tool_calling:     # how tools reach the model and how its reply is read
      mode: prompt_json
    embeddings:       # the bundled MiniLM of RAG, memory and tool preselection
      backend: auto
    models:
      fast:
        max_new_tokens: 256      # generation keys may sit directly in a profile
        tool_calling: {mode: constrained}

A profile is the default ``model:`` section updated with the profile's own keys. Generation
keys found directly in a profile override ``generation:``; a profile may also hold its own
``generation:``, ``tool_calling:`` and ``embeddings:`` sections.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lokal.errors import ConfigError

__all__ = [
    "EmbeddingSettings",
    "GenerationSettings",
    "ModelSettings",
    "Profile",
    "StagedSettings",
    "ToolCallingSettings",
    "default_config_path",
    "load_profile",
    "read_config",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GenerationSettings(_Strict):
    """Sampling settings; ``temperature: 0`` means greedy decoding."""

    max_new_tokens: int = Field(512, ge=1, le=131072, description="tokens to generate at most")
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    repeat_penalty: float = Field(1.0, gt=0.0, le=5.0)
    seed: int = Field(0, description="sampling seed; decisions are reproducible")
    do_sample: bool | None = Field(None, description="transformers-style switch; None: temp>0")
    stop: tuple[str, ...] = ()
    logprobs: int | None = Field(
        None,
        ge=0,
        le=20,
        description="report each generated token's log-probability and this many "
        "alternatives (llama.cpp; None: off)",
    )

    @property
    def greedy(self) -> bool:
        if self.do_sample is not None:
            return not self.do_sample
        return self.temperature == 0


class StagedSettings(_Strict):
    """How a staged decision weighs its evidence (``tool_calling.mode: staged``).

    Calibrated per profile on lokal's development cases (``benchmarks/calibrate_staged.py``),
    never on the evaluation sets. Answer or call: call when ``lm_weight * (log p(call
    opening) - log p(answer opening)) + similarity_weight * (similarity - similarity_center)
    + bm25_weight * min(5, best BM25) + signal_weight * (the question names a file, asks for a
    tool or names one: lokal.llm.signals) + call_bias (+ results_bias once this turn has tool
    results) > 0``. Which tool: the
    largest ``name_lm_weight * log p(name) + name_similarity_weight * cosine +
    name_bm25_weight * bm25 / best bm25 + name_file_weight * (before results: the question
    names a file of a kind the tool reads; after them: the tool computes an expression the
    question still asks for with a value they hold) - name_unfillable_weight * (a required
    path, e-mail, URL or date has no value)``. Another call: ``continue_lm_weight * (log p(next
    call) - log p(end)) + continue_clause_weight * (best similarity between a part of the
    request no call has used yet and a tool not called yet) + continue_list_weight * (such a
    part is a bare list item) + continue_later_weight * (the question states values of the
    kinds the calls took after the last one they used, and no call used them) +
    continue_cue_weight * (such a value follows the same word as a used one) +
    continue_again_weight * (there are such values and the question has a word that asks
    again: "another", "also", "respectively") + continue_bias > 0``.
    """

    lm_weight: float = 1.0
    similarity_weight: float = 0.0
    similarity_center: float = 0.0
    bm25_weight: float = 0.0
    call_bias: float = 0.0
    results_bias: float = 0.0
    signal_weight: float = Field(
        0.0,
        description="added to the call margin when the question names a file, asks for a tool "
        "or names one (checkable signals that do not change with wording)",
    )
    name_lm_weight: float = 1.0
    name_similarity_weight: float = 0.0
    name_bm25_weight: float = 0.0
    continue_lm_weight: float = 1.0
    continue_clause_weight: float = 0.0
    continue_list_weight: float = 0.0
    continue_later_weight: float = 0.0
    continue_cue_weight: float = 0.0
    continue_again_weight: float = 0.0
    continue_bias: float = 0.0
    later_value_bonus: float = Field(
        0.0,
        description="added to the log-probability of a candidate value, in a call after the "
        "first, that the question states after every value the earlier calls used (and in "
        "the part of the request the call is about, when there is one): 'radius of 5, 10 "
        "and 15': the third call's radius is 15, not 10 again",
    )
    waiting_value_penalty: float = Field(
        0.0,
        description="taken from the log-probability of a candidate value that the question "
        "states after another candidate of the same kind (after the same word) that no call "
        "has taken yet: 'income $100,000 ... income of $120,000' gives the first call "
        "100000, the next call 120000 (candidates.waiting_values)",
    )
    direction_value_bonus: float = Field(
        0.0,
        description="added to the log-probability of a candidate value that the question "
        "marks as the side of a pair the parameter is ('to Canadian dollars' for "
        "to_currency, 'from April 3rd' for start_date), taken from one it marks as the "
        "other side ('Canadian' is no from_currency; candidates.direction_cue)",
    )
    value_length_weight: float = Field(
        0.0, description="added times log(characters) to a candidate value's log-probability"
    )
    generated_values: bool = Field(
        True, description="the model's own greedy value competes with the copied candidates"
    )
    optional_args: Literal["mentioned", "all", "likely"] = Field(
        "mentioned",
        description="mentioned: optional parameters the question does not name are left out; "
        "likely: each of those is added when the model finds its key likelier than closing "
        "the arguments (+ optional_bias) and the question holds a value for it",
    )
    optional_bias: float = Field(
        0.0, description="added to the per-token margin of adding an optional parameter"
    )
    name_file_weight: float = Field(
        0.0,
        description="added to the fused score of a tool that takes a path when the question "
        "names a file of a kind it reads, before any tool result (lokal.llm.signals): "
        "'According to docs/guide.md, what is the calculator for?' is file_reader; after "
        "results, of a tool that takes an expression when the question still asks to "
        "compute with a value they hold ('..., then add 5 to it')",
    )
    name_unfillable_weight: float = Field(
        3.0,
        description="subtracted from the fused score of a tool with a required path, e-mail, "
        "URL or date parameter (by its name or format) for which neither the question nor the "
        "tool results hold a value of that shape: 'which file mentions X' is not file_reader",
    )
    max_candidates: int = Field(
        48,
        ge=2,
        le=1000,
        description="candidate values scored per argument at most (a long question offers "
        "hundreds of spans): single words first, then longer spans, in order of appearance",
    )


# The two axes of a decision, each named once; command-line choices derive from these.
Strategy = Literal["react", "plan_execute"]
STRATEGIES: tuple[str, ...] = Strategy.__args__  # type: ignore[attr-defined]
ToolCalling = Literal["prompt_json", "builtin", "constrained", "staged"]
TOOL_CALLING: tuple[str, ...] = ToolCalling.__args__  # type: ignore[attr-defined]
# The original command lines' ``--mode``: a strategy, or the mock backend.
LEGACY_MODES: dict[str, tuple[str, str | None]] = {
    "prompt_json": ("react", None),
    "plan_execute": ("plan_execute", None),
    "mock": ("react", "mock"),
}


def from_legacy_mode(mode: str) -> tuple[str, str | None]:
    """``(strategy, backend)`` for an old ``--mode`` value (backend None: the profile's)."""
    if mode not in LEGACY_MODES:
        raise ConfigError(f"mode must be one of {', '.join(LEGACY_MODES)}, got {mode!r}")
    return LEGACY_MODES[mode]


# the memory tool writes a note the user keeps: offered when the request asks to keep something
ON_REQUEST = {
    "remember": r"\b(?:remember|memori[sz]e|save|store|note (?:this|that|down)|make a note|"
    r"keep in mind|don'?t forget|do not forget|recall later)\b|记住|记下|记一下|保存",
}


class ToolCallingSettings(_Strict):
    """How tools reach the model (``mode``) and how its reply is judged."""

    mode: ToolCalling = "prompt_json"
    conflict_policy: Literal["tool_calls", "content", "error"] = "tool_calls"
    max_retries: int = Field(1, ge=0, le=10)
    calls_in_think: bool = False
    merge_duplicate_calls: bool = True
    max_string_length: int = Field(
        128, ge=8, le=512, description="bound on every argument string (constrained)"
    )
    max_content_length: int = Field(
        512, ge=8, le=512, description="bound on a final answer's length (constrained)"
    )
    max_calls: int = Field(4, ge=1, le=16, description="bound on calls per reply (constrained)")
    parallel_calls: bool = Field(True, description="more than one call per reply")
    answer_schema: dict[str, Any] | None = Field(
        None,
        description="JSON Schema a final answer's content must match (an API request's "
        "response_format); None: free text",
    )
    preselect_k: int | None = Field(
        None, ge=1, description="offer only the k tools that rank best against the question"
    )
    always: tuple[str, ...] = Field((), description="tools that preselection always keeps")
    on_request: dict[str, str] = Field(
        default_factory=lambda: dict(ON_REQUEST),
        description="tools offered only when the question names them, matches their pattern "
        "(a regular expression, case-insensitive) or called them already: a tool that "
        "changes what the user keeps, such as the memory tool `remember`, is not a tool "
        "for 'Write a thank-you note to Tom'",
    )

    @field_validator("on_request")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"on_request.{name}: not a regular expression: {exc}") from exc
        return value

    decision_budget_s: float | None = Field(
        60.0,
        gt=0,
        description="seconds one decision may take: a staged decision stops between two "
        "model calls, other modes before a retry, with error type timeout and what was found "
        "so far (Decision.partial); None: no limit",
    )
    staged: StagedSettings = StagedSettings()


class ModelSettings(_Strict):
    """What to load and where; the union of every built-in backend's options."""

    backend: str = "llamacpp"
    display_name: str | None = None
    # llama.cpp
    model_path: str | None = None
    n_ctx: int = Field(4096, ge=256)
    n_threads: int | None = Field(None, ge=1)
    n_batch: int = Field(512, ge=1)
    chat_format: str | None = None
    grammar_engine: Literal["llguidance", "gbnf"] = Field(
        "llguidance",
        description="how constrained decoding masks tokens: llguidance (fast) or llama.cpp's GBNF",
    )
    prompt_cache_mb: int = Field(
        0,
        ge=0,
        description="RAM (MB) for saved llama.cpp states of earlier prompts, so that "
        "interleaved conversations each resume from their own prefix (lokal serve); 0: only "
        "the previous prompt's prefix is reused",
    )
    # transformers
    model_name_or_path: str | None = None
    tokenizer_path: str | None = None
    gguf_file: str | None = None
    torch_dtype: str = "auto"
    device_map: str | None = None
    max_memory: dict[str, str] | None = None
    trust_remote_code: bool = False
    max_input_tokens: int | None = Field(None, ge=64)
    # OpenAI-compatible server
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = Field(None, description="name of the env variable with the key")
    timeout: float = Field(120.0, gt=0)
    http_retries: int = Field(3, ge=0, le=10)
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="how constrained mode sends the reply schema: OpenAI/vLLM json_schema, "
        "or json_object with a schema (llama-cpp-python's server)",
    )


EmbeddingBackend = Literal["auto", "onnx", "onnx-int8", "numpy"]
EMBEDDING_BACKENDS: tuple[str, ...] = EmbeddingBackend.__args__  # type: ignore[attr-defined]


class EmbeddingSettings(_Strict):
    """How the bundled all-MiniLM-L6-v2 runs (RAG, memory, tool preselection:
    ``lokal.rag.embeddings``). ``LOKAL_EMBEDDING_BACKEND`` overrides ``backend``.

    ``auto``: ONNX Runtime (fp32) where ``onnxruntime`` imports and the graph is built or can
    be, else NumPy; ``onnx``: the same, asked for by name; ``onnx-int8``: ONNX Runtime on a
    graph whose matrix products are quantised to 8 bits (faster, vectors a little further
    from the model's: docs/performance.md); ``numpy``: lokal's NumPy encoder. A backend that
    cannot run falls back to NumPy and says why (``lokal rag index`` prints it).
    """

    backend: EmbeddingBackend = "auto"
    threads: int | None = Field(
        None,
        ge=1,
        le=64,
        description="workers that embed the batches of a long list at once (ingest), each on "
        "one core; None: the cores lokal may use, at most 4. A single text (a question, a "
        "memory lookup) is embedded on the calling thread",
    )
    batch_size: int = Field(
        8,
        ge=1,
        le=256,
        description="texts per ONNX Runtime call, grouped by length so that a batch pads "
        "little (fp32; int8 runs one text per call: its activations are quantised per call)",
    )


def embedding_settings(
    values: dict[str, Any] | None = None, where: str = "embeddings"
) -> EmbeddingSettings:
    """EmbeddingSettings from ``values``, with ``LOKAL_EMBEDDING_BACKEND`` applied."""
    values = dict(values or {})
    if os.environ.get("LOKAL_EMBEDDING_BACKEND"):
        values["backend"] = os.environ["LOKAL_EMBEDDING_BACKEND"]
    return _build(EmbeddingSettings, values, where)


_GENERATION_KEYS = set(GenerationSettings.model_fields)


@dataclass(frozen=True)
class Profile:
    """A resolved profile: what to load, how to sample, how to pass tools."""

    name: str
    model: ModelSettings
    generation: GenerationSettings
    tool_calling: ToolCallingSettings
    source: Path | None = None
    embeddings: EmbeddingSettings = dataclasses.field(default_factory=EmbeddingSettings)

    @property
    def display_name(self) -> str:
        return self.model.display_name or self.name

    @property
    def backend(self) -> str:
        return self.model.backend

    def replace(self, **changes: Any) -> Profile:
        """A copy with whole fields replaced (``model=``, ``generation=``...), by name."""
        return dataclasses.replace(self, **changes)

    def with_tool_calling(self, **changes: Any) -> Profile:
        """A copy with tool-calling settings changed (``mode=``, ``max_retries=``…)."""
        merged = {**self.tool_calling.model_dump(), **changes}
        return self.replace(
            tool_calling=_build(ToolCallingSettings, merged, f"{self.name}: tool_calling")
        )

    def with_backend(self, backend: str) -> Profile:
        return self.replace(model=self.model.model_copy(update={"backend": backend}))


def default_config_path() -> Path:
    """``$LOKAL_MODEL_CONFIG``, else ``configs/model.yaml`` in the current directory, else
    the copy shipped inside the package."""
    env = os.environ.get("LOKAL_MODEL_CONFIG")
    if env:
        return Path(env)
    local = Path("configs/model.yaml")
    if local.is_file():
        return local
    return Path(__file__).parent / "configs" / "model.yaml"


def read_config(path: str | Path) -> dict[str, Any]:
    """The YAML mapping in ``path``; a clear ConfigError for a missing or malformed file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"model config {str(path)!r} not found; pass --model_config PATH")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    for section in ("model", "generation", "tool_calling", "embeddings", "models"):
        if section in data and data[section] is not None and not isinstance(data[section], dict):
            raise ConfigError(f"{path}: section {section!r} must be a mapping")
    return data


def _build(cls: type[_Strict], values: dict[str, Any], where: str) -> Any:
    try:
        return cls(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(section)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from exc


def _split_profile(raw: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
    """Split a profile mapping into model, generation, tool_calling, embeddings and unknown
    keys."""
    model: dict[str, Any] = {}
    generation: dict[str, Any] = {}
    tool_calling: dict[str, Any] = {}
    embeddings: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "generation":
            generation.update(value or {})
        elif key == "embeddings":
            embeddings.update(value or {})
        elif key == "tool_calling":
            if isinstance(value, str):
                tool_calling["mode"] = value
            else:
                tool_calling.update(value or {})
        elif key in ModelSettings.model_fields:
            model[key] = value
        elif key in _GENERATION_KEYS:
            generation[key] = value
        elif key in ("max_retries", "conflict_policy"):
            tool_calling[key] = value
        else:
            extra[key] = value
    return model, generation, tool_calling, embeddings, extra


def load_profile(
    model_config: str | Path | dict[str, Any] | None = None,
    model_name: str | None = None,
    *,
    tool_calling: str | None = None,
) -> Profile:
    """Resolve the profile ``model_name`` (or the default) of a model.yaml path or mapping.

    ``tool_calling`` overrides the profile's ``tool_calling.mode``. An unknown profile name is
    a ConfigError listing the available ones.
    """
    source: Path | None = None
    if isinstance(model_config, dict):
        data = model_config
    else:
        source = Path(model_config) if model_config is not None else default_config_path()
        data = read_config(source)
    where = str(source) if source else "model config"
    base = dict(data.get("model") or {})
    profiles = data.get("models") or {}
    name = model_name or base.pop("name", None) or "default"
    base.pop("name", None)
    raw = dict(base)
    if model_name:
        if model_name not in profiles:
            available = ", ".join(profiles) or "(none defined)"
            raise ConfigError(f"unknown model_name {model_name!r}. Available: {available}")
        selected = profiles[model_name] or {}
        if not isinstance(selected, dict):
            raise ConfigError(f"{where}: profile {model_name!r} must be a mapping")
        raw.update(selected)
    model_raw, gen_raw, tc_raw, emb_raw, extra = _split_profile(raw)
    for key in ("n_threads", "n_batch"):  # LOKAL_N_THREADS, LOKAL_N_BATCH override the profile
        if os.environ.get(f"LOKAL_{key.upper()}"):
            model_raw[key] = os.environ[f"LOKAL_{key.upper()}"]
    generation = {**(data.get("generation") or {}), **gen_raw}
    base_tools = data.get("tool_calling") or {}
    tool_settings = {**base_tools, **tc_raw}
    if isinstance(base_tools.get("staged"), dict) and isinstance(tc_raw.get("staged"), dict):
        tool_settings["staged"] = {**base_tools["staged"], **tc_raw["staged"]}
    if tool_calling:
        tool_settings["mode"] = tool_calling
    embeddings = {**(data.get("embeddings") or {}), **emb_raw}
    if "stop" in generation and isinstance(generation["stop"], list):
        generation["stop"] = tuple(generation["stop"])
    if extra:
        raise ConfigError(
            f"{where}: profile {name!r} has unknown keys {sorted(extra)}; "
            f"model keys are {sorted(ModelSettings.model_fields)}, generation keys are "
            f"{sorted(_GENERATION_KEYS)}"
        )
    return Profile(
        name=name,
        model=_build(ModelSettings, model_raw, f"{where}: profile {name!r}"),
        generation=_build(GenerationSettings, generation, f"{where}: generation"),
        tool_calling=_build(ToolCallingSettings, tool_settings, f"{where}: tool_calling"),
        source=source,
        embeddings=embedding_settings(embeddings, f"{where}: embeddings"),
    )


MOCK_NAME = "deterministic mock (no model)"


def model_line(profile: Profile) -> str:
    """What ``announce`` prints: the profile's display name, or the mock when the decisions
    come from the mock backend (the mock profile, or ``--backend mock`` on any profile)."""
    if profile.backend == "mock":
        name = profile.model.display_name
        shown = name if name and "mock" in name.lower() else MOCK_NAME
        if "mock" not in profile.name:
            shown += f"; tool_calling of profile {profile.name!r}"
        return f"model: {shown}"
    return f"model: {profile.display_name}"


def announce(profile: Profile) -> None:
    """Print the selected model to stderr, as the original scripts' command line did (see
    ``model_line``)."""
    print(model_line(profile), file=sys.stderr, flush=True)
