"""Signals of the question that a run can check, for the answer-or-call decision.

The model's opening margin and the question's similarity to the tools change with wording
("Read notes.txt and tell me..." against "What does notes.txt say about..."). These do not:

- ``file``: the question names a file (a name with a file extension, or a path that starts
  with ``./``, ``../`` or ``~/``) and a tool on offer takes a path;
- ``asked``: the question asks for a tool in so many words ("use a tool", "with the
  calculator tool", "调用工具"; not "what does calling a tool mean");
- ``named``: the question names a tool on offer (``table_analyzer``, "table analyzer", or a
  one-word name followed or preceded by "tool" / "function");
- ``which_file``: the question asks which file holds something and names none, and a tool
  on offer searches files (``file_searches``; such a tool also stays on offer through
  preselection and is signalled in stage 2).

Each is a plain function of the question's text and the tools' names and parameters. The
staged engine adds ``signal_weight`` to its call margin when any of them holds
(docs/decisions.md, "Answer or call"), and ``name_file_weight`` to the name score of each tool
that takes a path when the question names a file ("According to docs/guide.md, what is the
calculator for?" is a question for the file, whatever else it names). A question about the
present ("right now", "currently", "现在") lowers a tool's name score by the same weight when
the tool is the sibling of one about the present (``siblings_of_now``:
``weather_forecast_forecast`` beside ``weather_forecast_current``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "asks_a_definition",
    "asks_a_next_step",
    "asks_a_tool_step",
    "asks_about_now",
    "asks_for_a_tool",
    "asks_for_each",
    "asks_for_several",
    "asks_for_writing",
    "asks_how_many",
    "asks_which_file",
    "file_searches",
    "fits_the_file",
    "names_a_file",
    "names_a_tool",
    "question_signals",
    "searches_files",
    "siblings_of_now",
    "takes_a_path",
]

_EXTENSIONS = (
    "txt|md|csv|tsv|json|jsonl|yaml|yml|toml|ini|cfg|log|pdf|py|js|ts|html|htm|xml|xlsx|xls"
    "|docx|doc|sql|db|sqlite|ipynb|sh|rst|tex"
)
# a file name: word characters, dots, dashes and slashes ending in a known extension
_FILE = re.compile(rf"(?<![\w/.-])[\w./\\-]*\w\.(?:{_EXTENSIONS})(?![\w])", re.IGNORECASE)
# a path that says it is one: ./notes, ../data/sales, ~/reports (not "and/or", not "3/4")
_FOLDER_PATH = re.compile(r"(?<![\w:/.~])(?:\.{1,2}|~)/[\w./-]*\w")
# a kind of file a tool's description names: "CSV", "XLSX", "PDF" (formats a description
# names as what it reads, not as what it returns, unlike "JSON"), or any ".ext"
_KIND = re.compile(rf"\b((?-i:CSV|TSV|XLSX|XLS|PDF|DOCX|DOC))\b|(?<![\w.])\.({_EXTENSIONS})\b")
_PATH_PARAM = re.compile(r"(?:^|_)(?:path|file|filename|filepath|file_path|document)s?$", re.I)

_ASK_EN = re.compile(
    r"\b(?:use|using|call|calling|run|running|with|via|invoke|through)\s+"
    r"(?:a|an|the|your|some|any|one\s+of\s+the)?\s*(?:[\w-]+\s+){0,2}?"
    r"(?:tool|tools|function|functions)\b",
    re.IGNORECASE,
)
_WHICH_FILE = re.compile(
    r"\b(?:which|what|find|locate|name)\s+(?:the\s+|a\s+)?(?:\w+\s+)?(?:files?|documents?|paths?)\b"
    r"|\bwhere\s+(?:is|are)\b"
    # "files that mention the review", "search the workspace for the documents which ..."
    r"|\b(?:files?|documents?)\s+(?:(?:in|of|from|on)\s+(?:the\s+|my\s+|this\s+)?[\w-]+\s+)?"
    r"(?:that|which|where)\s+(?:\w+\s+)?(?:mentions?|contains?|says?"
    r"|talks?|refers?|holds?|has|have|includes?|lists?|names?|discuss(?:es)?)\b"
    r"|\bin\s+which\s+(?:file|document)"
    r"|(?:哪个|哪些|什么)(?:文件|文档)"
    # "在工作区里找出提到团队出游的文件": find the file that mentions ..., as what the
    # request ends with ("再搜索……包含 Agent 的文件，最后计算 2 + 2，并总结三条要点" asks
    # for the summary)
    r"|(?:找出|查找|找到|搜索|找|提到|提及|包含)[^。？！?!，,]*?的(?:文件|文档)[。？！?!\s]*$",
    re.IGNORECASE,
)
_EACH = re.compile(
    r"\b(?:each|every)\s+\w+|\bper\s+(?!cent\b)\w+|\bgroup(?:ed)?\b.{0,40}?\bby\s+\w+"
    r"|\bfor\s+all\s+\w+|每个|每一|各个|各",
    re.IGNORECASE,
)
_COUNT_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
    "十": 10,
}  # fmt: skip
_N_EN = r"(two|three|four|five|six|seven|eight|nine|ten|[2-9]|1[0-9])"
# "the three rows with the most units", "top 5", "the first two entries", "前三个"
_SEVERAL = re.compile(
    rf"\b(?:the|top|first|last|best|worst|highest|lowest|largest|smallest|biggest)\s+{_N_EN}\b"
    rf"|\b{_N_EN}\s+(?:rows|records|entries|items|lines|results)\b"
    r"|前\s*([两二三四五六七八九十]|[2-9]|1[0-9])",
    re.IGNORECASE,
)
_HOW_MANY = re.compile(r"\bhow\s+many\b|\bnumber\s+of\b|\bcount\b|多少|几个|几", re.IGNORECASE)
_ASK_ZH = re.compile(r"(?:使用|用|调用|借助|通过).{0,8}?(?:工具|函数)")


def _tool_names(tools: Iterable[Any]) -> list[str]:
    return [getattr(t, "name", None) or str(t.get("name", "")) for t in tools]


def _parameters(tool: Any) -> dict[str, Any]:
    params = getattr(tool, "parameters", None)
    if params is None and isinstance(tool, dict):
        params = tool.get("parameters") or {}
    return (params or {}).get("properties") or {}


def names_a_file(question: str) -> list[str]:
    """The file names and folder paths the question holds (``notes.txt``, ``data/sales.csv``)."""
    found = [m.group(0) for m in _FILE.finditer(question)]
    for match in _FOLDER_PATH.finditer(question):
        text = match.group(0)
        if "://" in question[max(0, match.start() - 3) : match.end()]:
            continue  # part of a URL
        if not any(text in f or f in text for f in found):
            found.append(text)
    return found


# a request for what a thing is or means: "Explain recursion briefly.", "What does calling
# a tool mean for an agent?", "define latency", "解释一下递归", "什么是递归？"
_DEFINITION = re.compile(
    r"\bexplain\b|\bdefine\b|\bdefinition\s+of\b|\bmeaning\s+of\b|\bwhat\s+is\s+meant\s+by\b"
    r"|\bwhat\s+(?:does|do)\b[^?.!]*\bmean\b|解释|是什么意思|什么意思|的定义|^\W*什么是",
    re.IGNORECASE,
)


# what stands before a tool phrase the question asks about: "what does | calling a tool mean"
_ASKED_ABOUT = re.compile(
    r"(?:\bwhat(?:\s+(?:does|do|is))?|\bmeaning\s+of|\bmeant\s+by|\bexplain)\s+$", re.I
)


def asks_a_definition(question: str) -> bool:
    """Whether the question asks what something is or means, or to explain it: knowledge
    the model holds, which no tool of a question that names no file, asks for no tool and
    names none returns (every such development question expects an answer, and none of
    BFCL's development questions is one)."""
    return bool(_DEFINITION.search(question))


# a request for a piece of writing the model composes itself: "Write a one-line thank-you
# note to Tom.", "Write a haiku about the sea.", "写一首关于海的诗"
_WRITING = re.compile(
    r"\b(?:write|compose|draft)\s+(?:me\s+|us\s+)?(?:a|an|one|some|two|three|short|brief)\b"
    r"[\w\s'-]{0,30}?\b(?:note|poem|haiku|limerick|story|tale|letter|e-?mail|message|toast"
    r"|joke|song|lyrics|slogan|tweet|caption|greeting|speech|apology|invitation|thank-you)s?\b"
    r"(?!\.\w)"  # not "notes.txt"
    r"|写(?:一|几)?(?:首|篇|封|段|句|条|个)[^，。？！,.?!]{0,12}?(?:诗|故事|信|邮件|短信|祝福|笑话|歌|贺词|感谢)",
    re.IGNORECASE,
)


def asks_for_writing(question: str) -> bool:
    """Whether the question asks for a piece of writing the model composes itself (a note,
    a poem, a story, a letter...): no tool writes it (both such development questions expect
    an answer, and none of BFCL's development questions is one)."""
    return bool(_WRITING.search(question))


def asks_for_a_tool(question: str) -> bool:
    """Whether the question asks, in so many words, for a tool to be used ("use a tool",
    "with the calculator"); a question about what calling a tool means does not."""
    if _ASK_ZH.search(question):
        return True
    match = _ASK_EN.search(question)
    if match is None:
        return False
    # "what does calling a tool mean": the tool is what it asks about, not what to use
    gerund = match.group(0).lower().startswith(("calling", "using", "running"))
    return not (gerund and _ASKED_ABOUT.search(question[: match.start()]))


# a request for a step after another: "then", "after that", "and read it", "然后"; not
# "then tell me the result" or "then summarise", which ask for the answer
_NEXT_STEP = re.compile(
    r"\bthen\b(?!\s+(?:summari[sz]e|answer|reply|respond)\b|\s+(?:tell|give|show)\s+me\s+"
    r"(?:the\s+)?(?:result|answer|it|that|them)\b|\s+let\s+me\s+know\b)"
    r"|\bafter\s+(?:that|this|which)\b|\bafterwards\b|\bnext\b|\bonce\s+you\b"
    r"|\band\s+(?:\w+\s+){1,2}(?:it|them|that\s+\w+|this\s+\w+|the\s+file)\b"
    r"|然后|接着|之后|再",
    re.IGNORECASE,
)


# what follows a word of a next step when that step is the answer, not a tool's:
# "..., then tell me what an agent is made of"
_ANSWER_STEP = re.compile(
    r"\s*(?:just\s+)?(?:tell|say|explain|describe|show|give|list|summari[sz]e|answer|report"
    r"|reply|respond|let\s+me\s+know|what|how|why|告诉|说明|解释|总结|回答)",
    re.IGNORECASE,
)


def asks_a_tool_step(question: str) -> bool:
    """Whether a next step the question asks for is a tool's ("..., then read the file you
    find", "and open it"), not the answer ("..., then tell me what an agent is made of":
    ``make run``'s question, which read the file, passed the repeated read over for a
    search of the file's name, and ended on the search's empty result)."""
    return any(
        not _ANSWER_STEP.match(question, match.end()) for match in _NEXT_STEP.finditer(question)
    )


def asks_a_next_step(question: str) -> bool:
    """Whether the question asks for a step after another ("search for the file, then read
    it", "find it and open that file", "然后"): a further call once results are in."""
    return bool(_NEXT_STEP.search(question))


def asks_which_file(question: str) -> bool:
    """Whether the question asks which file (or document) holds something."""
    return bool(_WHICH_FILE.search(question))


def asks_for_each(question: str) -> bool:
    """Whether the question asks about each of a kind ("per region", "for each product",
    "group by", "每个地区"), so every group of the result is the answer."""
    return bool(_EACH.search(question))


def asks_for_several(question: str) -> int:
    """How many items the question asks for by number ("the three rows with the most
    units", "top 5", "前三"): 0 when it names no such number."""
    match = _SEVERAL.search(question)
    if not match:
        return 0
    word = next(g for g in match.groups() if g).lower()
    return int(word) if word.isdigit() else _COUNT_WORDS[word]


def asks_how_many(question: str) -> bool:
    """Whether the question asks for a count ("how many", "the number of", "多少")."""
    return bool(_HOW_MANY.search(question))


def names_a_tool(question: str, tools: Iterable[Any]) -> list[str]:
    """The tools on offer that the question names: the exact identifier, its words as a
    phrase ("table analyzer"), or a one-word name next to "tool" / "function"."""
    folded = question.lower()
    named = []
    for name in _tool_names(tools):
        if not name:
            continue
        words = [w for w in re.split(r"[_.\-\s]+|(?<=[a-z])(?=[A-Z])", name) if w]
        identifier = re.compile(rf"(?<![\w]){re.escape(name.lower())}(?![\w])")
        if len(words) >= 2:
            phrase = r"[\s_.-]+".join(re.escape(w.lower()) for w in words)
            if identifier.search(folded) or re.search(rf"\b{phrase}\b", folded):
                named.append(name)
        elif words:
            word = re.escape(words[0].lower())
            if re.search(
                rf"\b{word}\s+(?:tool|function)\b|\b(?:tool|function)\s+(?:called\s+)?{word}\b",
                folded,
            ) or ("_" in name and identifier.search(folded)):
                named.append(name)
    return named


# the question asks about the present: "right now", "at the moment", "currently", "today",
# "现在"; not "just now" (the recent past), not a sentence-opening "Now," (a next step)
_NOW = re.compile(
    r"\b(?:right\s+now|at\s+the\s+moment|at\s+present|currently|current|today|tonight"
    r"|this\s+(?:moment|morning|afternoon|evening))\b"
    r"|(?<!\bjust\s)(?<![.!?]\s)(?<!^)\bnow\b(?!,)"
    r"|现在|目前|此刻|当前|今天|今日|眼下",
    re.IGNORECASE,
)
# what a tool about the present is named: weather_forecast_current, get_current_weather,
# latest_price, live_score
_NOW_WORDS = frozenset({"current", "now", "live", "latest", "realtime", "today"})


# ...and not about a period that reaches it: "from 10am to now", "since yesterday"
_PERIOD = re.compile(
    r"\b(?:yesterday|ago|last|past|since|until|till|previous|earlier|history|historical"
    r"|between|from)\b|昨天|前天|过去|以来|历史|之间|从",
    re.IGNORECASE,
)


def asks_about_now(question: str) -> bool:
    """Whether the question asks about the present moment ("What's the weather in London
    right now?", "Is it raining in Paris at the moment?", "北京现在天气怎么样？") and names
    no period ("the readings from 10am to now", "since yesterday")."""
    question = question.strip()
    return bool(_NOW.search(question)) and not _PERIOD.search(question)


def _name_words(name: str) -> list[str]:
    return [w.lower() for w in re.split(r"[_.\-\s]+|(?<=[a-z])(?=[A-Z])", name) if w]


def siblings_of_now(question: str, tools: Iterable[Any]) -> list[str]:
    """The tools a question about the present passes over for a sibling about the present:
    one whose name differs by a single word from a tool named with a word of the present
    (``current``, ``now``, ``latest``, ``live``…): ``weather_forecast_forecast`` beside
    ``weather_forecast_current``, ``get_weather_forecast`` beside ``get_current_weather``.
    Only siblings are passed over: the present in "What time is it now?" lowers no tool but
    those, and ``get_current_datetime``, with no sibling, is no more likely for it. Not when
    the question writes the sibling's own word ("the forecast for today")."""
    if not asks_about_now(question):
        return []
    said = set(re.findall(r"\w+", question.lower()))
    names = [n for n in _tool_names(tools) if n]
    words = {name: _name_words(name) for name in names}
    passed_over = []
    for name in names:
        present = [w for w in words[name] if w in _NOW_WORDS]
        if len(present) != 1:
            continue
        for other in names:
            if other == name or other in passed_over or len(words[other]) != len(words[name]):
                continue
            extra = list(words[other])
            for w in words[name]:
                if w != present[0] and w in extra:
                    extra.remove(w)
            if len(extra) == 1 and extra[0] not in _NOW_WORDS and extra[0] not in said:
                passed_over.append(other)
    return passed_over


_SEARCH_WORD = re.compile(r"\b(?:search\w*|find\w*|grep|look(?:s|ing)?\s+for|locate\w*)\b", re.I)
_FILE_WORD = re.compile(r"\b(?:files?|documents?|workspace|folders?|director(?:y|ies))\b", re.I)


def searches_files(tool: Any) -> bool:
    """Whether the tool searches files: its name or the first sentence of its description
    says it searches (search, find, grep, look for) and for files (files, documents, the
    workspace), and it takes a text to look for (``local_file_search``; not ``file_reader``,
    which reads one)."""
    name = re.sub(r"[_.\-]+", " ", _tool_names([tool])[0])
    first = _description(tool).split(". ")[0]
    text = f"{name} {first}"
    strings = [spec for spec in _parameters(tool).values() if (spec or {}).get("type") == "string"]
    return bool(_SEARCH_WORD.search(text) and _FILE_WORD.search(text) and strings)


def takes_a_path(tool: Any) -> bool:
    """Whether the tool has a parameter named for a path or file (``path``, ``file_path``)."""
    return any(_PATH_PARAM.search(p) for p in _parameters(tool))


def _description(tool: Any) -> str:
    text = getattr(tool, "description", None)
    if text is None and isinstance(tool, dict):
        text = tool.get("description")
    return str(text or "")


def fits_the_file(tool: Any, files: Iterable[str]) -> bool:
    """Whether ``tool`` takes a path and can read one of ``files``: a tool whose description
    names the kinds of file it reads ("a CSV, TSV or XLSX table") fits only those; one that
    names none ("a text file") fits any. "What does notes.txt say about the sales table?" is
    a question for the reader, not for the table tool."""
    if not takes_a_path(tool):
        return False
    kinds = {(m.group(1) or m.group(2)).lower() for m in _KIND.finditer(_description(tool))}
    if not kinds:
        return True
    return any(
        f.rsplit(".", 1)[-1].lower() in kinds for f in files if "." in f.rsplit("/", 1)[-1]
    ) or not any("." in f.rsplit("/", 1)[-1] for f in files)


# a message that only thanks, greets or takes leave: "Thanks, that's all I needed!",
# "Hello!", "谢谢你的帮助！"; it asks for nothing a tool could do
_SOCIAL = re.compile(
    r"^\W*(?:(?:many\s+)?thanks?(?:\s+(?:you|a\s+lot|so\s+much|very\s+much))*|thx|cheers|hi|hello|hey"
    r"|good\s*(?:bye|morning|afternoon|evening|night)|bye|see\s+you)(?![a-z])"
    r"|^\W*(?:谢谢|多谢|感谢|你好|您好|再见|拜拜)",
    re.IGNORECASE,
)
_SOCIAL_REST = re.compile(
    r"^[\W\s]*(?:(?:that'?s|that\s+(?:is|was)|it'?s|it\s+was|this\s+(?:is|was))\s+"
    r"(?:(?:very|really|so|super)\s+)?(?:all|it|great|perfect|helpful|useful|nice|awesome)"
    r"(?:\s+i\s+(?:needed|wanted))?|(?:for|with)\s+(?:(?:your|the)\s+)?help|again|everyone"
    r"|there|(?:你|您)?的?帮助|你|您|大家)?[\W\s]*$",
    re.IGNORECASE,
)


def only_social(question: str) -> bool:
    """Whether the message only thanks, greets or takes leave ("Thanks, that's all I
    needed!", "Hello!", "谢谢你的帮助！"): no request follows, so no tool is called,
    whatever the similarity says ("Thanks, that's all I needed!" sat 0.002 below the call
    threshold on the development cases)."""
    text = question.strip()
    match = _SOCIAL.match(text)
    return match is not None and bool(_SOCIAL_REST.match(text[match.end() :]))


def question_signals(question: str, tools: Iterable[Any]) -> dict[str, bool]:
    """Which checkable signals of a call the question holds, given the tools on offer."""
    tools = list(tools)
    takes_path = any(takes_a_path(t) for t in tools)
    return {
        "file": takes_path and bool(names_a_file(question)),
        "asked": asks_for_a_tool(question),
        "named": bool(names_a_tool(question, tools)),
        "which_file": bool(file_searches(question, tools)),
    }


def file_searches(question: str, tools: Iterable[Any]) -> list[str]:
    """The tools that search files, when the question asks which file holds something and
    names none ("Is there a file in the workspace that talks about the weather?"): no
    memory knows what the user's files hold."""
    if not asks_which_file(question) or names_a_file(question):
        return []
    tools = list(tools)
    return [n for n, tool in zip(_tool_names(tools), tools, strict=True) if searches_files(tool)]
