"""Tool preselection ranks the right tool first and keeps the pinned ones (real MiniLM).

The tests that load the real MiniLM are marked ``slow`` (out of ``make test-fast``): its
similarities are floating-point sums whose last digits differ between CPUs."""

import numpy as np
import pytest

from helpers import DATA
from lokal.llm.select import ToolSelector, bm25_text, tool_document
from lokal.skills.builtin import builtin_tools


@pytest.fixture(scope="module")
def tools():
    return builtin_tools(DATA / "workspace")  # Tools are ToolSpecs


@pytest.fixture(scope="module")
def selector():
    return ToolSelector()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Please open README.md and show me what it says.", "file_reader"),
        ("Compute 12 times 7 for me.", "calculator"),
        ("Find every file that mentions kubernetes.", "local_file_search"),
        ("How many times does the letter z appear in pizzazz?", "count_letter_in_string"),
        ("Give me summary statistics of the table data/x.csv.", "table_analyzer"),
        ("What's the date today in Berlin?", "get_current_datetime"),
        ("请帮我查找包含 report 的文件", "local_file_search"),
        ("现在北京几点了？", "get_current_datetime"),
    ],
)
def test_the_right_tool_ranks_first(selector, tools, question, expected):
    ranking, dense = selector.rank(question, tools)
    assert dense
    assert ranking[0].name == expected, [(t.name, round(t.score, 3)) for t in ranking]


@pytest.mark.slow
def test_top_k_keeps_named_called_and_always_tools(selector, tools):
    messages = [
        {"role": "user", "content": "Use count_letter_in_string to check the word banana."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_001", "name": "calculator", "args": {"expression": "1"}}],
        },
    ]
    selection = selector.select(messages, tools, k=1, always=["get_current_datetime"])
    pinned = {t.name: t.pinned for t in selection.ranking if t.pinned}
    assert pinned == {
        "count_letter_in_string": "named",
        "calculator": "called",
        "get_current_datetime": "always",
    }
    assert set(selection.offered) == {selection.ranking[0].name, *pinned}
    assert selection.to_dict()["k"] == 1


@pytest.mark.slow
def test_without_k_every_tool_is_offered_in_rank_order(selector, tools):
    selection = selector.select([{"role": "user", "content": "add 2 and 2"}], tools, k=None)
    assert selection.offered == [t.name for t in selection.ranking]
    assert len(selection.offered) == len(tools)


@pytest.mark.slow
def test_similarity_separates_a_tool_request_from_small_talk(selector, tools):
    need = selector.select([{"role": "user", "content": "Read the file notes.txt"}], tools, k=3)
    chat = selector.select([{"role": "user", "content": "Tell me a nice story."}], tools, k=3)
    assert need.similarity > chat.similarity


def test_bm25_alone_when_embeddings_are_off(tools):
    ranking, dense = ToolSelector(use_embeddings=False).rank("search files for budget", tools)
    assert not dense
    assert ranking[0].name == "local_file_search"
    assert all(t.similarity == 0.0 for t in ranking)


def test_an_injected_embedder_that_fails_is_not_hidden(tools):
    class Broken:
        def embed(self, texts):
            raise OSError("no weights")

    selector = ToolSelector(embedder=Broken())
    with pytest.raises(OSError):
        selector.rank("read notes.txt", tools)  # an injected embedder's failure is not hidden


def test_tool_vectors_are_cached(tools):
    calls = []

    class Counting:
        def embed(self, texts):
            calls.append(len(texts))
            return np.ones((len(texts), 4)) / 2.0

    selector = ToolSelector(embedder=Counting())
    selector.rank("one question", tools)
    selector.rank("another question", tools)
    # the background requests and the tools once, then only each question
    assert calls == [16, len(tools), 1, 1]


def test_documents_and_cjk_text_for_bm25(tools):
    doc = tool_document(next(t for t in tools if t.name == "table_analyzer"))
    assert doc.startswith("table analyzer") and "summary" in doc and "group by" in doc
    assert bm25_text("现在几点") == " 现在 在几 几点 "
    assert bm25_text("file_reader camelCase") == "file reader camel Case"


def test_question_vectors_are_cached_and_load_prepares_the_model(tools):
    calls = []

    class Counting:
        def embed(self, texts):
            calls.append(len(texts))
            return np.ones((len(texts), 4)) / 2.0

    selector = ToolSelector(embedder=Counting())
    assert not selector.loaded
    assert selector.load() is True and selector.loaded  # the background requests
    assert selector.load() is None  # nothing more to do
    first = selector.rank("one question", tools)
    # every decision of a run (and every tool turn of a served conversation) asks again
    assert selector.rank("one question", tools) == first
    assert calls == [16, len(tools), 1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "offered"),
    [
        # issue 20's greeting and the paraphrase pairs' thank-you notes called `remember`
        ("Write a one-line thank-you note to Tom.", False),
        ("Thank Tom in a single short sentence.", False),
        ("Write a short greeting for Sam.", False),
        ("Remember that the staging server is called tortoise.", True),
        ("Please save this for later: my locker is number 42.", True),
        ("Note down that the review moved to Monday.", True),
        ("记住：我的名字是 Ada。", True),
    ],
)
def test_the_memory_tool_is_offered_only_when_asked_for(selector, tools, question, offered):
    from lokal.config import ON_REQUEST
    from lokal.memory.store import Memory, remember_tool

    memory = Memory.__new__(Memory)  # the tool's schema only; it is never called here
    with_memory = [*tools, remember_tool(memory)]
    messages = [{"role": "user", "content": question}]
    for k in (4, None):
        selection = selector.select(messages, with_memory, k=k, on_request=ON_REQUEST)
        assert ("remember" in selection.offered) is offered
        assert ("remember" in selection.held) is not offered
        assert ("held" in selection.to_dict()) is not offered
    # without on_request the tool competes like any other
    selection = selector.select(messages, with_memory, k=None)
    assert "remember" in selection.offered and not selection.held


def test_an_on_request_pattern_that_is_not_a_regex_is_a_config_error():
    from pydantic import ValidationError

    from lokal.config import ToolCallingSettings

    with pytest.raises(ValidationError, match=r"on_request\.remember"):
        ToolCallingSettings(on_request={"remember": "(unclosed"})
    assert "remember" in ToolCallingSettings().on_request


@pytest.mark.slow
def test_a_computation_on_a_result_keeps_the_calculator_on_offer(tools):
    # "Look at notes.txt for the number of rows in the sales table, then add 7 to that
    # number.": the calculator ranked below the top k, so the computation could not be made
    from helpers import MODEL_CONFIG
    from lokal.config import load_profile
    from lokal.llm.request import _preselect

    settings = load_profile(MODEL_CONFIG).with_tool_calling(preselect_k=1).tool_calling
    question = "Look at notes.txt for the number of rows in the sales table, then add 7 to it."
    selection = _preselect([{"role": "user", "content": question}], tools, settings, True)
    assert "calculator" in selection.offered and len(selection.offered) <= 2
    # a question that computes nothing with a result keeps the plain top k
    selection = _preselect([{"role": "user", "content": "Open notes.txt"}], tools, settings, True)
    assert selection.offered == ["file_reader"]
