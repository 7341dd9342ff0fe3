"""llama.cpp backend (llama-cpp-python): GGUF models on the CPU, grammars, prefix reuse.

The prompt is rendered here with the chat template from the GGUF metadata, so the exact
text sent is known: a conversation that grows turn by turn renders to a prompt that starts
with the previous one, and llama.cpp reuses the evaluated prefix (its KV cache) instead of
reading the whole prompt again. ``Completion.details["reused_prompt_tokens"]`` says how many
tokens were reused.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from lokal.config import GenerationSettings, ModelSettings, Profile
from lokal.errors import BackendDeadline, BackendError, ConfigError
from lokal.llm.backends import Completion, GenerationRequest
from lokal.llm.backends.masks import TokenMasks
from lokal.llm.grammar import PROPERTY_ORDER, schema_key
from lokal.llm.prompts import fallback_tools_system
from lokal.llm.quality import MAX_LOOP_PERIOD, MIN_LOOP_REPEATS, MIN_LOOP_TOKENS, loop_period
from lokal.models import resolve_model_path
from lokal.progress import report

__all__ = ["LlamaCppBackend"]

_INSTALL_HINT = "pip install 'llama-cpp-python[server]==0.3.36' (or: make test / make run)"


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigError(f"the llamacpp backend needs llama-cpp-python: {_INSTALL_HINT}") from exc
    return llama_cpp


def _load_llama(llama_cpp: Any, path: str, settings: ModelSettings, profile: Profile) -> Any:
    return llama_cpp.Llama(
        model_path=path,
        n_ctx=settings.n_ctx,
        n_threads=settings.n_threads or max(1, os.cpu_count() or 1),
        n_batch=settings.n_batch,
        seed=profile.generation.seed,
        verbose=False,
    )


def _amx_cpu() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return "amx_int8" in handle.read().split()
    except OSError:
        return False


@contextlib.contextmanager
def _without_amx_repacking(llama_cpp: Any) -> Iterator[None]:
    """On CPUs with AMX, llama.cpp repacks the weights into an AMX buffer whose first decode
    crashes (SIGSEGV in ggml_backend_amx_mul_mat; ggml-org/llama.cpp#20824): there the model
    is loaded without extra buffer types (``use_extra_bufts``). Elsewhere nothing changes."""
    low = llama_cpp.llama_cpp
    default = low.llama_model_default_params
    if not _amx_cpu() or "use_extra_bufts" not in dict(default()._fields_):
        yield
        return

    def params() -> Any:
        values = default()
        values.use_extra_bufts = False
        return values

    low.llama_model_default_params = params
    try:
        yield
    finally:
        low.llama_model_default_params = default


class LlamaCppBackend:
    """One loaded GGUF model; thread-safe (one generation at a time)."""

    name = "llamacpp"
    capabilities = frozenset({"prompt_json", "builtin", "constrained", "staged", "score"})
    reports_logprobs = True  # GenerationSettings.logprobs: details["logprobs"]

    def __init__(self, profile: Profile) -> None:
        llama_cpp = _import_llama()
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        settings = profile.model
        path = resolve_model_path(settings.model_path)
        if not os.path.isfile(path):
            raise ConfigError(f"profile {profile.name!r}: model file {path!r} not found")
        self._llama_cpp = llama_cpp
        try:
            with _without_amx_repacking(llama_cpp):
                self.llm = _load_llama(llama_cpp, path, settings, profile)
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
        self.grammar_engine = settings.grammar_engine
        self._token_masks: TokenMasks | None = None
        self._reused = 0
        # states of earlier prompts by their tokens, so that conversations taking turns (a
        # server's clients) each resume from their own prefix; create_completion uses it too
        self._states = (
            llama_cpp.LlamaRAMCache(capacity_bytes=settings.prompt_cache_mb << 20)
            if settings.prompt_cache_mb
            else None
        )
        if self._states is not None:
            self.llm.set_cache(self._states)
        self.last_score: dict[str, int] = {}
        self._lock = threading.Lock()
        # a request's deadline stops llama.cpp inside an evaluation: it asks this callback
        # between two graph nodes whether to abort. It is installed only while a request
        # with a deadline runs (a Python call per node costs a little time).
        self._abort_at: float | None = None
        self._aborted = False
        self._abort_callback = llama_cpp.ggml_abort_callback(self._past_deadline)
        self._no_abort = llama_cpp.ggml_abort_callback()  # NULL: llama.cpp's default
        # free the model before interpreter shutdown tears down llama_cpp's module globals
        atexit.register(self.close)

    def close(self) -> None:
        with self._lock:
            if getattr(self, "llm", None) is not None:
                self.llm.close()

    # -- deadline -----------------------------------------------------------------------

    def _past_deadline(self, _data: Any) -> bool:
        if self._abort_at is not None and time.perf_counter() > self._abort_at:
            self._aborted = True
            return True
        return False

    @contextlib.contextmanager
    def _within(self, deadline: float | None) -> Iterator[None]:
        """Run an evaluation that llama.cpp aborts once ``deadline`` passes; the abort
        is raised as ``BackendDeadline``. The KV cache stays consistent: llama.cpp drops
        the aborted batch, and ``n_tokens`` counts only the batches that completed."""
        if deadline is None:
            yield
            return
        late = time.perf_counter() - deadline
        if late > 0:
            raise BackendDeadline(f"the deadline passed {late:.2f} s before the model call")
        ctx = self.llm._ctx.ctx
        self._abort_at, self._aborted = deadline, False
        self._llama_cpp.llama_set_abort_callback(ctx, self._abort_callback, None)
        try:
            yield
        except (RuntimeError, ValueError) as exc:
            if self._aborted:
                raise BackendDeadline(
                    "llama.cpp stopped the evaluation at the request's deadline"
                ) from exc
            raise
        finally:
            self._llama_cpp.llama_set_abort_callback(ctx, self._no_abort, None)
            self._abort_at = None

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

    def grammar_for(self, schema: dict[str, Any], suffix: str = "") -> Any:
        """The compiled llama.cpp GBNF grammar of a reply schema (followed by the literal
        ``suffix``), cached per schema: the fallback when llguidance is not installed or the
        profile says ``grammar_engine: gbnf``."""
        key = schema_key(schema) + "\x00" + suffix
        grammar = self._grammars.get(key)
        if grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

            try:
                gbnf = json_schema_to_gbnf(schema_key(schema), prop_order=PROPERTY_ORDER)
                if suffix:
                    gbnf = re.sub(r"^root ::=", "reply-value ::=", gbnf, count=1, flags=re.M)
                    gbnf += f"\nroot ::= reply-value {json.dumps(suffix)}\n"
                grammar = LlamaGrammar.from_string(gbnf, verbose=False)
            except Exception as exc:
                raise ConfigError(
                    f"the reply schema cannot be turned into a grammar: {exc}"
                ) from exc
            self._grammars[key] = grammar
        return grammar

    def _constraint(self, schema: dict[str, Any], suffix: str = "") -> tuple[dict[str, Any], str]:
        """create_completion arguments that constrain the reply to ``schema`` (+ ``suffix``),
        and the engine used."""
        if self.grammar_engine == "llguidance":
            masks = self._masks()
            if masks is not None:
                return {"logits_processor": [masks.processor(schema, suffix)]}, "llguidance"
        return {"grammar": self.grammar_for(schema, suffix)}, "gbnf"

    def _masks(self) -> TokenMasks | None:
        if self._token_masks is None:
            self._token_masks = TokenMasks.for_llama(self.llm)
            if self._token_masks is None:
                self.grammar_engine = "gbnf"  # llguidance is not installed
        return self._token_masks

    def count_prompt_tokens(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> int:
        return len(self.llm.tokenize(self.render(messages, tools).encode("utf-8"), special=True))

    def input_budget(self, settings: GenerationSettings) -> int:
        return self.llm.n_ctx() - settings.max_new_tokens

    # -- generation ---------------------------------------------------------------------

    def _prompt_text(self, request: GenerationRequest) -> str:
        """The rendered prompt, plus the part of the reply already chosen (``prefix``)."""
        return self.render(request.messages, request.tools if request.pass_tools else None) + (
            request.prefix or ""
        )

    def generate(self, request: GenerationRequest) -> Completion:
        prompt = self._prompt_text(request)
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
        engine = None
        if request.response_schema:
            constraint, engine = self._constraint(request.response_schema, request.response_suffix)
            sampling.update(constraint)
        recorder = None
        if s.logprobs is not None:  # after the grammar's mask: the distribution sampled from
            recorder = _LogprobRecorder(s.logprobs)
            sampling["logits_processor"] = [*sampling.get("logits_processor", []), recorder]
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
            loop = _LoopStop(len(tokens), self.llm.detokenize)
            report(phase="generating")
            try:
                with self._within(request.deadline):
                    output = self.llm.create_completion(
                        prompt,
                        stopping_criteria=self._llama_cpp.StoppingCriteriaList([loop]),
                        **sampling,
                    )
            except BackendDeadline:
                raise
            except (RuntimeError, ValueError) as exc:
                raise BackendError(f"llama.cpp generation failed: {exc}") from exc
        choice = output["choices"][0]
        usage = output.get("usage") or {}
        details: dict[str, Any] = {"reused_prompt_tokens": reused, "prompt_text": prompt}
        if engine:
            details["constraint"] = engine
        if recorder is not None:
            details["logprobs"] = recorder.entries(choice.get("text") or "", self.llm.detokenize)
        finish = choice.get("finish_reason")
        if loop.period is not None:
            finish = "repetition"
            details["loop_period_tokens"] = loop.period
        return Completion(
            text=choice.get("text") or "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=finish,
            details=details,
        )

    # -- scoring ------------------------------------------------------------------------

    def score(self, request: GenerationRequest, continuations: list[str]) -> list[float]:
        """The model's log-probability of each continuation after the prompt (+ prefix).

        The prompt is evaluated once (reusing the KV cache of the previous call where the
        tokens agree). Continuations are tokenized together with the prompt, so a token
        that spans the boundary is scored as the model would have written it. They are
        read in token order, as a trie: a token sequence shared by several continuations
        (``"Read``, ``"Read notes``, ``"Read notes.txt``…) is evaluated once, and a
        continuation that ends one token past a known position costs no evaluation at all.
        """
        if not continuations:
            return []
        text = self._prompt_text(request)
        llm = self.llm
        report(phase="scoring")
        with self._lock, self._within(request.deadline):
            base = llm.tokenize(text.encode("utf-8"), special=True)
            full = [llm.tokenize((text + c).encode("utf-8"), special=True) for c in continuations]
            common = min([len(base), *(_common_prefix(base, f) for f in full)])
            common = max(1, common)
            if max(len(f) for f in full) + 1 > llm.n_ctx():
                raise BackendError(
                    f"prompt of {len(base)} tokens does not fit the context of {llm.n_ctx()}"
                )
            paths = [tuple(f[common:]) for f in full]
            # node (the tokens after the prompt) -> log-probabilities of the next token
            nodes: dict[tuple[int, ...], np.ndarray] = {
                (): _log_softmax(self._prefill(base[:common]))
            }
            in_cache: tuple[int, ...] = ()  # the tokens after the prompt now in the KV cache
            for path in sorted(set(paths), key=lambda p: (p, -len(p))):
                needed = path[:-1]
                if not path or needed in nodes:
                    continue
                shared = _common_prefix(list(in_cache), list(needed))
                while needed[:shared] not in nodes:  # start where the logits are known
                    shared -= 1
                rows = self._logits_after(common + shared, list(needed[shared:]))
                for i in range(len(needed) - shared):
                    nodes[needed[: shared + i + 1]] = _log_softmax(rows[i])
                in_cache = needed
            scores = [
                sum(float(nodes[path[:i]][token]) for i, token in enumerate(path)) for path in paths
            ]
            llm.n_tokens = common  # the continuations' cache entries are dropped on next use
            self.last_score = {"prompt_tokens": len(base), "reused_prompt_tokens": self._reused}
        return scores

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as this model reads it (no special tokens added)."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _prefill(self, tokens: list[int]) -> np.ndarray:
        """Evaluate ``tokens`` (reusing the cached prefix) and return the last logits."""
        llm = self.llm
        cached = llm.n_tokens
        keep = llm.longest_token_prefix(llm._input_ids[:cached].tolist(), tokens) if cached else 0
        if self._states is not None and tokens in self._states:
            state = self._states[tokens]  # the saved state sharing the longest prefix
            saved = llm.longest_token_prefix(state.input_ids.tolist(), tokens)
            if saved > keep:  # another conversation's turn came in between: resume ours
                llm.load_state(state)
                keep = saved
        keep = min(keep, len(tokens) - 1)  # re-read at least one token for fresh logits
        self._reused = keep
        llm.n_tokens = keep
        llm.eval(tokens[keep:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        logits = logits.copy()
        if self._states is not None and len(tokens) - keep > _SAVE_AFTER_TOKENS:
            self._states[tokens] = llm.save_state()
        return logits

    def _logits_after(self, position: int, tokens: list[int]) -> np.ndarray:
        """Logits after each of ``tokens`` placed at ``position`` (the cache is not kept)."""
        llm = self.llm
        llm._ctx.kv_cache_seq_rm(-1, position, -1)
        rows = []
        step = max(1, llm.n_batch)  # a llama.cpp batch holds n_batch tokens at most
        for start in range(0, len(tokens), step):
            chunk = tokens[start : start + step]
            llm._batch.set_batch(batch=chunk, n_past=position + start, logits_all=True)
            llm._ctx.decode(llm._batch)
            shape = (len(chunk), llm.n_vocab())
            rows.append(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=shape).copy())
        return np.concatenate(rows)


# a prefill that read fewer new tokens than this is not worth a saved state
_SAVE_AFTER_TOKENS = 64


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


class _LogprobRecorder:
    """A logits processor that writes down, for each generated token, the log-probabilities
    of the distribution it was drawn from (the model's, after the grammar's mask), so that a
    reply can give each token's log-probability and its ``top`` alternatives (OpenAI's
    ``logprobs``). The token drawn at one step is read at the next, as the last evaluated
    id; the last one from the text that remains."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.steps: list[tuple[np.ndarray, np.ndarray]] = []  # (top ids, their logprobs)
        self.chosen: list[tuple[int, float]] = []  # (token, logprob) of each finished step
        self.last: np.ndarray | None = None

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        if self.last is not None:
            token = int(input_ids[-1])
            self.chosen.append((token, float(self.last[token])))
        self.last = _log_softmax(np.asarray(logits, dtype=np.float64))
        k = max(self.top, 1)
        ids = np.argpartition(-self.last, k - 1)[:k]
        ids = ids[np.argsort(-self.last[ids], kind="stable")]
        self.steps.append((ids, self.last[ids]))
        return logits

    def entries(self, text: str, detokenize: Any) -> list[dict[str, Any]]:
        """One entry a generated token (``token``, ``logprob``, ``bytes``, ``top_logprobs``)
        whose text is in ``text``: the last step's token is the one whose text ends it (an
        end-of-sequence or a stop string leaves nothing: that step is not written)."""

        def piece(token: int) -> tuple[str, list[int]]:
            raw = detokenize([token])
            return raw.decode("utf-8", errors="replace"), list(raw)

        chosen = list(self.chosen)
        written = b"".join(detokenize([t]) for t, _ in chosen).decode("utf-8", errors="replace")
        rest = text[len(written) :] if text.startswith(written) else ""
        if rest and self.last is not None and len(self.steps) > len(chosen):
            ids, _ = self.steps[len(chosen)]
            match = [int(t) for t in ids if piece(int(t))[0] == rest]
            token = match[0] if match else int(np.argmax(self.last))
            chosen.append((token, float(self.last[token])))
        out = []
        for (token, logprob), (ids, logprobs) in zip(chosen, self.steps, strict=False):
            word, raw = piece(token)
            alternatives = []
            for alt, value in list(zip(ids.tolist(), logprobs.tolist(), strict=True))[: self.top]:
                alt_word, alt_raw = piece(int(alt))
                alternatives.append({"token": alt_word, "logprob": value, "bytes": alt_raw})
            out.append(
                {"token": word, "logprob": logprob, "bytes": raw, "top_logprobs": alternatives}
            )
        return out


class _LoopStop:
    """A stopping criterion: stop when the generated tokens end in a loop."""

    def __init__(self, prompt_tokens: int, detokenize: Any = None) -> None:
        self.start = prompt_tokens
        self.period: int | None = None
        self.detokenize = detokenize
        self.sent = 0  # generated tokens whose text was reported
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> bool:
        generated = input_ids[self.start :]
        # the text of the tokens evaluated since the last call (the newest id is not written
        # yet when llama-cpp-python asks), for a listener that streams the reply
        text = ""
        if self.detokenize is not None and len(generated) - 1 > self.sent:
            ids = [int(t) for t in generated[self.sent : len(generated) - 1]]
            self.sent = len(generated) - 1
            text = self.utf8.decode(self.detokenize(ids))
        report(tokens=1, text=text)  # once per generated token: the live progress counts them
        if len(generated) < MIN_LOOP_TOKENS:
            return False
        self.period = loop_period(generated[-MAX_LOOP_PERIOD * MIN_LOOP_REPEATS :].tolist())
        return self.period is not None
