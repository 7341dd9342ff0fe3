"""Token masks from llguidance, applied through llama-cpp-python's logits processor.

llama.cpp's own grammar sampler (GBNF) checks every vocabulary entry against the grammar at
every generated token: with a reply schema of nine tools, constrained decoding on the bundled
model cost 1.6x free decoding per token. llguidance computes the set of allowed tokens with a
lexer and a token trie (tens of microseconds for JSON schemas), and the logits processor only
sets the disallowed logits to -inf: see docs/performance.md for the measured ratio.

One ``TokenMasks`` per loaded model holds llguidance's view of the vocabulary (built once,
about 0.25 s) and the compiled grammars, cached per schema; every generation gets a fresh copy
of the compiled matcher, because a matcher holds the parse state.
"""

from __future__ import annotations

import json
import threading
import warnings
from typing import Any

import numpy as np

from lokal.errors import ConfigError

__all__ = ["TokenMasks"]

# Compact JSON, as lokal's prompts show it: ", " and ": " separators, no free whitespace, so
# a tiny model cannot pad a reply with newlines until max_new_tokens.
_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


class _MaskProcessor:
    """A llama-cpp-python logits processor: advance the matcher by the token sampled last,
    then mask every token the grammar does not allow next."""

    def __init__(self, matcher: Any, n_vocab: int) -> None:
        from llguidance.numpy import allocate_token_bitmask

        self.matcher = matcher
        self.n_vocab = n_vocab
        self.bitmask = allocate_token_bitmask(1, n_vocab)
        self.started = False

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        from llguidance.numpy import fill_next_token_bitmask

        if self.started:
            self.matcher.consume_token(int(input_ids[-1]))
        self.started = True
        fill_next_token_bitmask(self.matcher, self.bitmask)
        allowed = np.unpackbits(self.bitmask.view(np.uint8), bitorder="little")[: self.n_vocab]
        logits[allowed == 0] = -np.inf
        return logits

    @property
    def error(self) -> str | None:
        return self.matcher.get_error() if self.matcher.is_error() else None


class TokenMasks:
    """llguidance for one llama.cpp model: compiled grammars per schema, fresh matchers."""

    def __init__(self, tokenizer: Any, n_vocab: int) -> None:
        self.tokenizer = tokenizer
        self.n_vocab = n_vocab
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_llama(cls, llm: Any) -> TokenMasks | None:
        """The masks for a loaded ``llama_cpp.Llama``; None when llguidance is not installed."""
        try:
            import llguidance.llamacpp
        except ImportError:
            return None
        with warnings.catch_warnings():
            # it reads each token's attributes with a llama.cpp call deprecated in
            # llama-cpp-python 0.3.36 (one warning per vocabulary entry otherwise)
            warnings.simplefilter("ignore", DeprecationWarning)
            tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(llm._model.vocab)
        return cls(tokenizer, llm.n_vocab())

    def matcher(self, schema: dict[str, Any], suffix: str = "") -> Any:
        """A fresh matcher for ``schema``, followed by the literal ``suffix`` if given (the
        compiled grammar is cached)."""
        import llguidance

        key = json.dumps([schema, suffix], sort_keys=True, separators=(",", ":"))
        with self._lock:
            template = self._compiled.get(key)
            if template is None:
                if suffix:
                    options = {**schema, "x-guidance": _JSON_OPTIONS}
                    lark = f"start: value {json.dumps(suffix)}\nvalue: %json {json.dumps(options)}"
                    grammar = llguidance.LLMatcher.grammar_from_lark(lark)
                else:
                    grammar = llguidance.LLMatcher.grammar_from_json_schema(
                        schema, defaults=_JSON_OPTIONS
                    )
                template = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
                if template.is_error():
                    raise ConfigError(
                        f"the reply schema cannot be compiled to a grammar: {template.get_error()}"
                    )
                self._compiled[key] = template
            return template.deep_copy()

    def processor(self, schema: dict[str, Any], suffix: str = "") -> _MaskProcessor:
        return _MaskProcessor(self.matcher(schema, suffix), self.n_vocab)
