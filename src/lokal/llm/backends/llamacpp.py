"""llama.cpp backend (llama-cpp-python): GGUF models on the CPU, grammars, prefix reuse.

The prompt is rendered here with the chat template from the GGUF metadata, so the exact
text sent is known: a conversation that grows turn by turn renders to a prompt that starts
with the previous one, and llama.cpp reuses the evaluated prefix (its KV cache) instead of
reading the whole prompt again. ``Completion.details["reused_prompt_tokens"]`` says how many
tokens were reused.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from lokal.config import Profile
from lokal.errors import BackendError, ConfigError
from lokal.llm.backends import Completion, GenerationRequest
from lokal.llm.grammar import PROPERTY_ORDER, schema_key
from lokal.llm.prompts import fallback_tools_system
from lokal.models import resolve_model_path

__all__ = ["LlamaCppBackend"]

_INSTALL_HINT = "pip install 'llama-cpp-python[server]==0.3.36' (or: make test / make run)"


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigError(f"the llamacpp backend needs llama-cpp-python: {_INSTALL_HINT}") from exc
    return llama_cpp


class LlamaCppBackend:
    """One loaded GGUF model; thread-safe (one generation at a time)."""

    name = "llamacpp"
    capabilities = frozenset({"prompt_json", "builtin", "constrained"})

    def __init__(self, profile: Profile) -> None:
        llama_cpp = _import_llama()
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        settings = profile.model
        path = resolve_model_path(settings.model_path)
        if not os.path.isfile(path):
            raise ConfigError(f"profile {profile.name!r}: model file {path!r} not found")
        self._llama_cpp = llama_cpp
        try:
            self.llm = llama_cpp.Llama(
                model_path=path,
                n_ctx=settings.n_ctx,
                n_threads=settings.n_threads or max(1, os.cpu_count() or 1),
                n_batch=settings.n_batch,
                seed=profile.generation.seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ConfigError(f"profile {profile.name!r}: could not load {path}: {exc}") from exc
        self.model_path = path
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ConfigError(
                f"{path} has no chat template in its metadata; set chat_format in the profile"
            )
        self.chat_template = template
        self.template_reads_tools = "tools" in template
        eos_id, bos_id = self.llm.token_eos(), self.llm.token_bos()
        model = self.llm._model
        self.eos_token = model.token_get_text(eos_id) if eos_id != -1 else ""
        self.bos_token = model.token_get_text(bos_id) if bos_id != -1 else ""
        self.formatter = Jinja2ChatFormatter(template, self.eos_token, self.bos_token)
        self._grammars: dict[str, Any] = {}
        self._lock = threading.Lock()
        # free the model before interpreter shutdown tears down llama_cpp's module globals
        atexit.register(self.close)

    def close(self) -> None:
        with self._lock:
            if getattr(self, "llm", None) is not None:
                self.llm.close()

    # -- prompt -------------------------------------------------------------------------

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> str:
        """The prompt text, through the GGUF's own chat template (``tools`` for builtin)."""
        if tools and not self.template_reads_tools:
            # The template ignores tools=: state them in the Hermes style small models know.
            messages = fallback_tools_system(messages, tools)
            tools = None
        try:
            return self.formatter(messages=messages, tools=tools).prompt
        except Exception as exc:  # jinja raises many kinds; all mean the template refused
            raise BackendError(f"the chat template could not render the messages: {exc}") from exc

    def grammar_for(self, schema: dict[str, Any]) -> Any:
        """The compiled llama.cpp grammar of a reply schema, cached per schema."""
        key = schema_key(schema)
        grammar = self._grammars.get(key)
        if grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

            try:
                gbnf = json_schema_to_gbnf(key, prop_order=PROPERTY_ORDER)
                grammar = LlamaGrammar.from_string(gbnf, verbose=False)
            except Exception as exc:
                raise ConfigError(
                    f"the reply schema cannot be turned into a grammar: {exc}"
                ) from exc
            self._grammars[key] = grammar
        return grammar

    def count_prompt_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> int:
        return len(self.llm.tokenize(self.render(messages, tools).encode("utf-8"), special=True))

    def input_budget(self, settings: Any) -> int:
        return self.llm.n_ctx() - settings.max_new_tokens

    # -- generation ---------------------------------------------------------------------

    def generate(self, request: GenerationRequest) -> Completion:
        prompt = self.render(request.messages, request.tools if request.pass_tools else None)
        grammar = self.grammar_for(request.response_schema) if request.response_schema else None
        s = request.settings
        sampling: dict[str, Any] = {
            "max_tokens": s.max_new_tokens,
            "temperature": 0.0 if s.greedy else s.temperature,
            "top_p": s.top_p,
            "top_k": s.top_k if s.top_k else (1 if s.greedy else 40),
            "min_p": s.min_p,
            "repeat_penalty": s.repeat_penalty,
            "seed": s.seed,
            "stop": [t for t in (self.eos_token, *s.stop) if t],
        }
        with self._lock:
            tokens = self.llm.tokenize(prompt.encode("utf-8"), special=True)
            cached = self.llm.n_tokens
            reused = (
                self.llm.longest_token_prefix(self.llm._input_ids[:cached].tolist(), tokens)
                if cached
                else 0
            )
            if len(tokens) + s.max_new_tokens > self.llm.n_ctx():
                raise BackendError(
                    f"prompt of {len(tokens)} tokens + {s.max_new_tokens} new tokens exceeds "
                    f"the context of {self.llm.n_ctx()}; raise n_ctx or shorten the conversation"
                )
            try:
                output = self.llm.create_completion(prompt, grammar=grammar, **sampling)
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"llama.cpp generation failed: {exc}") from exc
        choice = output["choices"][0]
        usage = output.get("usage") or {}
        return Completion(
            text=choice.get("text") or "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            details={"reused_prompt_tokens": reused, "prompt_text": prompt},
        )
