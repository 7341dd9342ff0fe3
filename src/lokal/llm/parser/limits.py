"""Every size and count the parser reads from one reply, in one place.

Each step of the parser is bounded so that hostile text stays cheap; these are the bounds.
"""

from __future__ import annotations

MAX_CALLS = 64  # tool calls read from one reply (and from one run of JSON values)
MAX_TAGS = 2048  # <tool_call>/<function=>/<parameter=> tags read from one reply
MAX_NAME_CHARS = 200  # longest tool or parameter name read from a tag or a marker
MAX_DECODE_STARTS = 64  # raw_decode start positions tried per text
MAX_FENCES = 32  # markdown fences looked into per text
MAX_NESTING = 64  # deeper brackets are not handed to json_repair (it turns quadratic there)
MAX_REPAIRS = 4  # json_repair calls per reply ...
MAX_REPAIR_CHARS = 50_000  # ... each on at most this many characters ...
MAX_REPAIR_TOTAL = 100_000  # ... and on at most this many in all
MAX_COERCE_DEPTH = 32  # nesting depth coercion follows; deeper values are left as they are
MAX_PYTHONIC_CHARS = 20_000  # longest text handed to ast.parse
MAX_PYTHONIC_SCANS = 64  # "tool_name(" occurrences examined in prose
