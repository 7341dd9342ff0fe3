"""transformers backend (the path the original scripts used): any local Hugging Face model
directory or GGUF file.

``AutoTokenizer`` / ``AutoModelForCausalLM`` from ``model_name_or_path`` with ``torch_dtype``,
``device_map`` and ``gguf_file``; greedy when ``temperature: 0``; constrained decoding through
an xgrammar logits processor. Nothing is fetched from a hub: loading runs with
``HF_HUB_OFFLINE=1`` and ``local_files_only``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from lokal.config import GenerationSettings, Profile
from lokal.errors import BackendError, ConfigError
from lokal.llm.backends import Completion, GenerationRequest
from lokal.llm.grammar import schema_key
from lokal.llm.prompts import fallback_tools_system
from lokal.models import resolve_model_path
from lokal.progress import report

__all__ = ["TransformersBackend"]

_INSTALL_HINT = "pip install torch==2.13.0 transformers gguf accelerate xgrammar"


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(
            f"the transformers backend needs torch and transformers: {_INSTALL_HINT}"
        ) from exc
    return torch, transformers


def _locate(profile: Profile) -> tuple[str, str | None]:
    """(directory or repo path, gguf file name or None) for the profile's model."""
    settings = profile.model
    path = resolve_model_path(settings.model_name_or_path, what="model_name_or_path")
    gguf_file = settings.gguf_file
    if path.endswith(".gguf") and gguf_file is None:
        path, gguf_file = str(Path(path).parent), Path(path).name
    if not Path(path).exists():
        raise ConfigError(
            f"profile {profile.name!r}: model directory {path!r} not found "
            "(lokal loads local models only; download the checkout first)"
        )
    return path, gguf_file


class TransformersBackend:
    """One loaded model and tokenizer; one generation at a time."""

    name = "transformers"
    capabilities = frozenset({"prompt_json", "builtin", "constrained"})

    def __init__(self, profile: Profile) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        torch, transformers = _imports()
        settings = profile.model
        path, gguf_file = _locate(profile)
        common: dict[str, Any] = {"local_files_only": True}
        if gguf_file:
            common["gguf_file"] = gguf_file
        if settings.trust_remote_code:
            common["trust_remote_code"] = True
        dtype = settings.torch_dtype
        model_kwargs: dict[str, Any] = dict(common)
        model_kwargs["dtype"] = dtype if dtype == "auto" else getattr(torch, dtype, None)
        if model_kwargs["dtype"] is None:
            raise ConfigError(f"profile {profile.name!r}: unknown torch_dtype {dtype!r}")
        if settings.device_map:
            model_kwargs["device_map"] = settings.device_map
        if settings.max_memory:
            model_kwargs["max_memory"] = settings.max_memory
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                settings.tokenizer_path or path, **common
            )
            self.model = transformers.AutoModelForCausalLM.from_pretrained(path, **model_kwargs)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"profile {profile.name!r}: could not load {path}: {exc}") from exc
        self.model.eval()
        self._torch = torch
        self.max_input_tokens = settings.max_input_tokens
        template = self.tokenizer.chat_template or ""
        if not template:
            raise ConfigError(f"{path}: the tokenizer has no chat template")
        self.template_reads_tools = "tools" in template
        self._compiler: Any = None
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _render_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None):
        if tools and not self.template_reads_tools:
            messages, tools = fallback_tools_system(messages, tools), None
        try:
            encoded = self.tokenizer.apply_chat_template(
                messages,
                tools=tools,
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
        except Exception as exc:  # jinja errors come in many types
            raise BackendError(f"the chat template could not render the messages: {exc}") from exc
        return encoded

    def count_prompt_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> int:
        return int(self._render_ids(messages, tools)["input_ids"].shape[1])

    def input_budget(self, settings: GenerationSettings) -> int | None:
        return self.max_input_tokens

    def _logits_processor(self, schema: dict[str, Any]) -> Any:
        try:
            import xgrammar
        except ImportError as exc:
            raise ConfigError(
                f"constrained mode on transformers needs xgrammar: {_INSTALL_HINT}"
            ) from exc
        key = schema_key(schema)
        compiled = self._grammars.get(key)
        if compiled is None:
            if self._compiler is None:
                info = xgrammar.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=self.model.config.vocab_size
                )
                self._compiler = xgrammar.GrammarCompiler(info)
            compiled = self._compiler.compile_json_schema(key)
            self._grammars[key] = compiled
        # the processor holds matcher state, so each generation gets a fresh one
        return xgrammar.contrib.hf.LogitsProcessor(compiled)

    def generate(self, request: GenerationRequest) -> Completion:
        torch = self._torch
        s = request.settings
        encoded = self._render_ids(request.messages, request.tools if request.pass_tools else None)
        prompt_tokens = int(encoded["input_ids"].shape[1])
        kwargs: dict[str, Any] = {"max_new_tokens": s.max_new_tokens}
        if s.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
            if s.top_k:
                kwargs["top_k"] = s.top_k
        if s.repeat_penalty != 1.0:
            kwargs["repetition_penalty"] = s.repeat_penalty
        if request.response_schema:
            kwargs["logits_processor"] = [self._logits_processor(request.response_schema)]
        if s.stop:
            kwargs["stop_strings"] = list(s.stop)
            kwargs["tokenizer"] = self.tokenizer
        kwargs["pad_token_id"] = self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
        kwargs["streamer"] = _TokenReporter()
        with self._lock:
            if not s.greedy:
                torch.manual_seed(s.seed)
            try:
                with torch.no_grad():
                    output = self.model.generate(
                        **{k: v.to(self.model.device) for k, v in encoded.items()}, **kwargs
                    )
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"transformers generation failed: {exc}") from exc
        new_tokens = output[0][prompt_tokens:]
        text = self.tokenizer.decode(new_tokens, skip_special_tokens=True)
        finish = "length" if len(new_tokens) >= s.max_new_tokens else "stop"
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(new_tokens),
            finish_reason=finish,
        )


class _TokenReporter:
    """A transformers streamer that reports each generated token to the live progress (the
    first ``put`` is the prompt)."""

    def __init__(self) -> None:
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        report(tokens=int(value.numel()))

    def end(self) -> None:
        pass
