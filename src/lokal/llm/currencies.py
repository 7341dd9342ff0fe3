"""Currency names as the ISO 4217 codes a parameter asks for: "euros" → "EUR".

Conversion tools take codes ("The currency to convert from, e.g. USD"); a question says
"Convert 200 euros to US dollars". The spans "euros" and "US" are candidates, "EUR" and "USD"
are not, and a 135M model does not write the code itself. This module reads the currencies
a text names, from the ISO 4217 table as packaged by ``pycountry`` (in the wheel, nothing
downloaded):

- a name as the table writes it, a plural allowed: "euros" (Euro), "US dollars" (US
  Dollar), "Canadian dollars", "Indian rupees", "Swiss francs";
- a single word that is the noun of one currency's name only ("yen", "baht"), or the first
  word of a name whose noun is its own and no country's adjective: "yuan" (Yuan Renminbi).

"dollars" or "pounds" alone name no currency (a dozen currencies are dollars, and a pound
is also a weight); nor does a word of a country's name ("Canadian" alone). Without
``pycountry`` nothing is offered.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["currency_codes", "wants_currency"]

_CURRENCY_PARAM = re.compile(r"currenc", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]+")
_MAX_WORDS = 3  # "New Zealand Dollar"


def wants_currency(name: str, spec: dict[str, Any]) -> bool:
    """Whether a string parameter takes a currency (by its name or its description)."""
    said = f"{name} {spec.get('description') or ''}"
    return bool(_CURRENCY_PARAM.search(said))


@functools.cache
def _table() -> tuple[dict[str, str], dict[str, str]]:
    """Folded currency name → code, and a folded word that alone names one currency →
    its code; both empty without ``pycountry``. Funds, units of account and names with a
    note in brackets ("WIR Euro", "US Dollar (Next day)") are left out. A word alone names
    a currency when it is the noun of that currency's name only ("yen", "renminbi",
    "baht"), or the first word of a name whose noun is its own and which is no country's
    adjective ("yuan" of Yuan Renminbi; not "armenian" of Armenian Dram); never a
    qualifier of a noun other currencies share ("canadian", "dollar")."""
    try:
        import pycountry
    except ImportError:
        return {}, {}
    names: dict[str, str] = {}
    for currency in pycountry.currencies:
        name = currency.name
        if currency.alpha_3.startswith("X") or re.search(r"\(|\b(?:Fund|Unit|WIR)\b", name):
            continue
        names.setdefault(" ".join(w.casefold() for w in _WORD.findall(name)), currency.alpha_3)
    countries = [c.name.casefold() for c in pycountry.countries]
    owners: dict[str, set[str]] = {}
    for name, code in names.items():
        owners.setdefault(name.split()[-1], set()).add(code)
    alone = {word: next(iter(codes)) for word, codes in owners.items() if len(codes) == 1}
    for name, code in names.items():
        parts = name.split()
        if (
            len(parts) == 2
            and parts[-1] in alone
            and parts[0] not in owners
            and not any(country.startswith(parts[0][:4]) for country in countries)
        ):
            alone.setdefault(parts[0], code)
    return names, alone


def _singular(word: str) -> str:
    """ "euros" → "euro", "rupees" → "rupee"; short words and "-ss" as they are."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def currency_codes(text: str) -> list[tuple[str, str]]:
    """The currencies ``text`` names, as (code, the words as written), in order, each code
    once: "Convert 200 euros to US dollars" → [("EUR", "euros"), ("USD", "US dollars")]."""
    names, alone = _table()
    if not names:
        return []
    found: dict[str, str] = {}
    matches = list(_WORD.finditer(text))
    for end in range(len(matches)):
        for size in range(min(_MAX_WORDS, end + 1), 0, -1):
            run = matches[end - size + 1 : end + 1]
            folded = [m.group().casefold() for m in run]
            folded[-1] = _singular(folded[-1])
            key = " ".join(folded)
            code = names.get(key) or (alone.get(key) if size == 1 else None)
            if code is not None:
                found.setdefault(code, text[run[0].start() : run[-1].end()])
                break
    return list(found.items())
