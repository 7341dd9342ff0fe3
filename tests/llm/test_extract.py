"""The extracted answer (lokal.llm.extract): the passage of a tool result, or a selected
memory note, that answers the question, when the model's replies fail the answer checks."""

from __future__ import annotations

import json

from helpers import MODEL_CONFIG, envelope
from lokal.config import load_profile
from lokal.llm.backends.scripted import ScriptedBackend
from lokal.llm.checks import NOTES_HEADING
from lokal.llm.decide import generate_ai_message
from lokal.llm.evidence import Passage, answerable, result_passages, text_passages
from lokal.llm.extract import choose_passage, extract_answer

INTRO = """An agent system is usually built from four parts:

1. Model - a language model that decides what to do next:
   answer directly, or call one or more tools.
2. Tools - functions the model can call through a JSON schema.
3. Memory - documents the agent keeps between sessions.
4. Loop - the runtime repeats until the model gives a final answer.
"""


NOTES_TEXT = """Notes

- Quarterly review is on Friday at 10:00.
- The sales table lives in data/sales.csv (20 rows: region, product, units, price).
- Remember to check the weather before planning the team outing.
"""


def tool_turn(question, name, args, output):
    """A question, one successful call of ``name`` and its result."""
    call = {"id": "call_001", "name": name, "args": args}
    result = {"status": "success", "output": output, "error": None}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_001", "name": name, "content": json.dumps(result)},
    ]


def read_turn(question, output, path="docs/agent_intro.txt"):
    return tool_turn(question, "file_reader", {"path": path}, output)


def test_a_list_is_summed_up_by_its_lead_line_and_item_heads():
    passages = text_passages(INTRO)
    assert "An agent system is usually built from four parts: Model, Tools, Memory, Loop." in (
        passages
    )
    # wrapped item lines are joined; CJK sentences split without spaces
    assert any(p.startswith("Model - a language model") and p.endswith("tools.") for p in passages)
    assert text_passages("第一句。第二句。") == ["第一句。", "第二句。"]


def test_passages_keep_the_tool_and_file_they_came_from():
    messages = read_turn("What is an agent made of?", {"path": "x", "content": INTRO})
    passages = result_passages(messages)
    assert {p.tool for p in passages} == {"file_reader"}
    assert {p.file for p in passages} == {"docs/agent_intro.txt"}


def test_the_likelihood_chooses_among_the_closest_passages():
    passages = [Passage("Tea is green.", "t"), Passage("The meeting is on Thursday.", "t")]
    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "Thursday" in text else -9.0)
    chosen = choose_passage("When is the meeting?", passages, backend=backend, by="likelihood")
    assert chosen.passage.text == "The meeting is on Thursday." and len(chosen.scores) == 2
    assert backend.scored  # the model was asked
    # without a scoring backend the embedding's choice stands
    assert choose_passage("When is the meeting?", passages).passage in passages


def test_the_embedding_chooses_by_default_whatever_the_model_likes():
    # the bundled model's likelihood chose worse than the closest passage (CHOOSE_BY)
    passages = [Passage("Tea is green.", "t"), Passage("The meeting is on Thursday.", "t")]
    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "Tea" in text else -9.0)
    chosen = choose_passage("When is the meeting?", passages, backend=backend)
    assert chosen.passage.text == "The meeting is on Thursday." and not backend.scored


def test_nothing_is_extracted_from_failed_calls():
    call = {"id": "call_001", "name": "file_reader", "args": {"path": "nope.txt"}}
    failed = {"status": "error", "output": None, "error": "no such file"}
    messages = [
        {"role": "user", "content": "Read nope.txt"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_001", "name": "file_reader",
         "content": json.dumps(failed), "status": "error"},
    ]  # fmt: skip
    assert extract_answer(messages) is None


def test_a_selected_note_answers_when_the_model_cannot():
    # after memory add "The staging server is called tortoise.": "The staging server is called"
    profile = load_profile(MODEL_CONFIG, "smollm2-135m-free")
    system = (
        f"You help.\n\n{NOTES_HEADING}\n- The staging server is called tortoise. (source: user)"
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is the staging server called?"},
    ]
    cut = envelope(content="The staging server is called")
    backend = ScriptedBackend([cut] * (profile.tool_calling.max_retries + 1))
    result = generate_ai_message(profile, messages, [], backend=backend)
    assert result.ok and result.parse["answer_source"] == "extracted"
    assert result.ai_message["content"] == (
        "The staging server is called tortoise.\n\n(quoted from memory)"
    )
    assert "stops mid-sentence" in result.parse["model_failed"]["message"]


def test_an_answer_that_sends_the_user_to_the_tool_that_ran_gives_way_to_its_result():
    # development task m12: "You can use the table_analyzer tool to extract the desired
    # information." was the answer after table_analyzer had returned the summary
    profile = load_profile(MODEL_CONFIG, "smollm2-135m-free")
    overview = "a table of 20 rows and 4 columns: region, product, units, price"
    messages = tool_turn(
        "分析一下 data/sales.csv 这个表格。",
        "table_analyzer",
        {"path": "data/sales.csv"},
        {**SUMMARY, "overview": overview},
    )
    defers = envelope(content="You can use the table_analyzer tool to extract the information.")
    backend = ScriptedBackend([defers] * (profile.tool_calling.max_retries + 1))
    result = generate_ai_message(profile, messages, [], backend=backend)
    assert result.ok and result.parse["answer_source"] == "extracted"
    assert "table_analyzer, which has run" in result.parse["model_failed"]["message"]
    assert "table_analyzer tool" not in result.ai_message["content"]


def test_a_search_hit_and_a_table_row_are_one_passage_each():
    # "Which files in the workspace mention Gizmo?" extracted "files_matched: 1": the hit's
    # path and snippet were separate passages, and the count matched the question better
    from helpers import DATA
    from lokal.skills.builtin import builtin_tools

    tools = {t.name: t for t in builtin_tools(DATA / "workspace")}
    hits = tools["local_file_search"](query="Gizmo")
    messages = read_turn("Which files in the workspace mention Gizmo?", hits)
    messages[1]["tool_calls"][0].update(name="local_file_search", args={"query": "Gizmo"})
    texts = [p.text for p in result_passages(messages)]
    (hit,) = [t for t in texts if "Gizmo" in t]
    assert hit.startswith("path: data/sales.csv") and "snippet: East,Gizmo" in hit
    assert "query: Gizmo" not in texts  # the call's own argument is not evidence
    totals = tools["table_analyzer"](
        path="data/sales.csv", operation="groupby", group_by="region", column="units"
    )
    texts = [p.text for p in result_passages(read_turn("Units per region?", totals))]
    assert "region: South, sum_units: 70" in texts  # the region stays with its total


def test_a_lone_heading_is_not_an_answer():
    # "读一下 notes.txt，季度评审是星期几？" extracted "Notes", the file's title
    from helpers import DATA
    from lokal.llm.extract import says_something
    from lokal.skills.builtin import builtin_tools

    (reader,) = [t for t in builtin_tools(DATA / "workspace") if t.name == "file_reader"]
    notes = reader(path="notes.txt")  # "Notes\n\n- Quarterly review is on Friday at 10:00. ..."
    messages = read_turn("读一下 notes.txt，季度评审是星期几？", notes, path="notes.txt")
    passages = result_passages(messages)
    assert "Notes" in [p.text for p in passages]
    chosen = choose_passage("读一下 notes.txt，季度评审是星期几？", passages)
    assert chosen.passage.text != "Notes"
    assert says_something("count: 4") and says_something("季度评审在周五")
    assert not says_something("Notes")
    # a heading alone is still extracted when it is all there is
    assert choose_passage("?", [Passage("Notes", "file_reader")]).passage.text == "Notes"


def search_turn(question, output):
    return tool_turn(question, "local_file_search", {"query": "Gizmo"}, output)


HITS = {
    "query": "Gizmo",
    "root_dir": ".",
    "results": [{"path": "data/sales.csv", "line": 4, "snippet": "East,Gizmo,8,7.25"}],
    "files_matched": 1,
    "files_scanned": 4,
    "truncated": False,
}


def test_bookkeeping_beside_the_hits_is_not_the_answer():
    # "Which files in the workspace mention Gizmo?" was answered "files_matched: 1"
    messages = search_turn("Which files in the workspace mention Gizmo?", HITS)
    passages = result_passages(messages)
    kept = {p.text: p.bookkeeping for p in passages}
    assert kept["files_matched: 1"] and kept["files_scanned: 4"]
    assert not kept["path: data/sales.csv, line: 4, snippet: East,Gizmo,8,7.25"]
    # even when the model likes the count best, the hit is chosen
    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "files_" in text else -9.0)
    chosen = extract_answer(messages, backend=backend)
    assert chosen.passage.text.startswith("path: data/sales.csv")
    # a count asked for is a count: the bookkeeping of that count stays on offer
    counted = answerable("How many files mention Gizmo?", result_passages(messages))
    assert "files_matched: 1" in {p.text for p in counted}
    assert "truncated" not in " ".join(p.text for p in counted)  # not asked about


def test_a_which_file_question_takes_a_passage_that_names_a_file():
    passages = [
        Passage("Gizmo sold 8 units in the East.", "local_file_search"),
        Passage("path: data/sales.csv, line: 4", "local_file_search"),
    ]
    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "units" in text else -9.0)
    chosen = choose_passage("Which file mentions Gizmo?", passages, backend=backend)
    assert chosen.passage.text.startswith("path: data/sales.csv")
    # a passage of a file that was read names it where it came from
    read = [Passage("Check the weather before the team outing.", "file_reader", "notes.txt")]
    assert choose_passage("Which file mentions the team outing?", read).passage.file == "notes.txt"


GROUPS = {
    "path": "data/sales.csv",
    "operation": "groupby",
    "groups": [
        {"region": "East", "sum_units": 52},
        {"region": "North", "sum_units": 38},
        {"region": "South", "sum_units": 70},
        {"region": "West", "sum_units": 49},
    ],
    "truncated": False,
}


def test_a_question_about_each_group_is_answered_with_every_group():
    # "How many units did each region sell?" was answered with one region's total
    def turn(question):
        return tool_turn(question, "table_analyzer", {"path": "data/sales.csv"}, GROUPS)

    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "South" in text else -9.0)
    each = extract_answer(turn("How many units did each region sell?"), backend=backend)
    assert each.passage.listing
    assert all(r in each.passage.text for r in ("East", "North", "South", "West"))
    one = extract_answer(turn("Which region sold the most units?"), backend=backend)
    assert not one.passage.listing and one.passage.text.startswith("region: ")
    # "the three regions that sold most" asks for several of them: the listing
    three = extract_answer(turn("What are the three regions that sold most?"), backend=backend)
    assert three.passage.listing


def test_a_reply_refused_as_it_stood_is_not_handed_back_but_its_parts_are():
    notes = {"path": "notes.txt", "content": NOTES_TEXT, "chars": 198, "total_chars": 198}
    messages = read_turn("When is the quarterly review?", notes, path="notes.txt")
    review = "Quarterly review is on Friday at 10:00."
    # the model answered with exactly that line and was refused: it is not lokal's answer
    refused = [json.dumps({"content": review})]
    again = extract_answer(messages, refused=refused)
    assert again.passage.text != review and not again.passage.bookkeeping
    # a refused reply that held the line among others (a copy of the whole file, with an
    # invented sentence) does not take the line away
    whole = [json.dumps({"content": NOTES_TEXT + " The review is tomorrow."})]
    assert extract_answer(messages, refused=whole).passage.text == review


def test_a_flat_result_of_several_findings_is_one_passage_too():
    # "What's the current weather like in Beijing?" was answered "country: China": each
    # field of the weather record was a passage, and the location, the call's own argument,
    # was left out of all of them
    weather = {"location": "Beijing", "country": "China", "condition": "Sunny",
               "temperature_c": 15, "humidity_pct": 30}  # fmt: skip
    messages = read_turn("What's the current weather like in Beijing?", weather)
    messages[1]["tool_calls"][0].update(
        name="weather_forecast_current", args={"location": "Beijing"}
    )
    texts = [p.text for p in result_passages(messages)]
    whole = (
        "location: Beijing, country: China, condition: Sunny, temperature_c: 15, humidity_pct: 30"
    )
    assert whole in texts
    assert "humidity_pct: 30" in texts  # a question about one finding still finds it alone
    assert "location: Beijing" not in texts  # alone, the echo of the call says nothing
    # a computation is one finding: its result alone, not the expression beside it
    computed = tool_turn(
        "What is 7 + 20?",
        "calculator",
        {"expression": "7 + 20"},
        {"expression": "7 + 20", "result": 27},
    )
    assert [p.text for p in result_passages(computed)] == ["result: 27"]


def guide_passages():
    from helpers import DATA

    text = (DATA / "workspace" / "docs" / "agent_guide.md").read_text("utf-8")
    return [Passage(t, "file_reader", "docs/agent_guide.md") for t in text_passages(text)]


def test_the_named_file_is_no_part_of_what_is_looked_for():
    # with "docs/agent_guide.md" in the query, "This guide shows how to work with the local
    # agent runtime." was the closest passage to "what is the calculator for?"
    question = "According to docs/agent_guide.md, what is the calculator for?"
    assert "arithmetic" in choose_passage(question, guide_passages()).passage.text


def test_the_words_of_the_question_count_beside_the_embedding():
    # MiniLM alone put the guide's first line closest to "which tools can the agent use?";
    # BM25 puts the line that lists them first, and the fused ranks take it
    question = "Read docs/agent_guide.md and tell me which tools the agent can use."
    chosen = choose_passage(question, guide_passages()).passage.text
    assert chosen.startswith("Tools the agent can use:") and "calculator" in chosen


def test_a_list_lead_gives_way_to_the_lead_with_its_items():
    passages = [Passage(t, "file_reader") for t in text_passages(INTRO)]
    texts = [p.text for p in answerable("What are the four parts?", passages)]
    assert "An agent system is usually built from four parts:" not in texts
    assert "An agent system is usually built from four parts: Model, Tools, Memory, Loop." in (
        texts
    )


def test_a_search_that_found_nothing_says_so():
    # "在工作区里搜索提到季度评审的文件。" searched for the whole sentence, found nothing, and
    # "files_scanned: 4" was extracted as the answer (fourth held-out set, 2026-12-06)
    nothing = {**HITS, "results": [], "files_matched": 0}
    messages = search_turn("Which file mentions the quarterly review?", nothing)
    passages = result_passages(messages)
    kept = {p.text: p.bookkeeping for p in passages}
    assert kept["results: none"] is False
    assert kept["files_scanned: 4"] and kept["files_matched: 0"]
    backend = ScriptedBackend(scorer=lambda prefix, text: -1.0 if "files_" in text else -9.0)
    assert extract_answer(messages, backend=backend).passage.text == "results: none"
    # beside hits, an empty list is no finding of its own
    some = {**HITS, "skipped": []}
    texts = [p.text for p in result_passages(search_turn("Which file?", some))]
    assert "skipped: none" not in texts


SUMMARY = {
    "path": "data/sales.csv",
    "operation": "summary",
    "rows": 20,
    "columns": ["region", "product", "units", "price"],
    "dtypes": {"region": "str", "product": "str", "units": "int64", "price": "float64"},
    "describe": [
        {"column": "units", "count": 20.0, "mean": 10.45, "max": 21.0},
        {"column": "price", "count": 20.0, "mean": 6.4125, "max": 10.0},
    ],
}


def test_a_statistic_asked_in_words_is_answered_by_its_field_not_by_the_questions_word():
    # development task d17: "What is the average price in data/sales.csv?" extracted
    # "columns: price" from the table's summary (the question's own word given back), then
    # "price: float64"; the record with the price's mean answers it
    messages = tool_turn(
        "What is the average price in data/sales.csv?",
        "table_analyzer",
        {"path": "data/sales.csv"},
        SUMMARY,
    )
    passages = result_passages(messages)
    kept = [p.text for p in answerable(messages[0]["content"], passages)]
    assert kept and all("mean: 6.4125" in text for text in kept)
    assert "6.4125" in extract_answer(messages).passage.text
    # a field whose value is the question's word says nothing; without a statistic asked,
    # the other passages stay
    fields = result_passages(
        tool_turn("Which column is the price?", "describe", {}, {"column": "price", "unit": "EUR"})
    )
    other = [p.text for p in answerable("Which column is the price?", fields)]
    assert other == ["unit: EUR"]


def test_a_short_list_is_one_passage_and_a_sentence_beside_records_says_something():
    # development task m12: "分析一下 data/sales.csv 这个表格。" was answered with
    # "columns: price", one item of the table's columns, while the summary's one-line
    # overview was bookkeeping beside the records
    summary = {**SUMMARY, "overview": "a table of 20 rows and 4 columns: region, product"}
    messages = tool_turn("Analyse data/sales.csv.", "table_analyzer", {"path": "x"}, summary)
    passages = {p.text: p for p in result_passages(messages)}
    assert "columns: region, product, units, price" in passages
    assert not any(text.startswith("columns: ") and "," not in text for text in passages)
    assert not passages["overview: a table of 20 rows and 4 columns: region, product"].bookkeeping
    assert passages["rows: 20"].bookkeeping and passages["operation: summary"].bookkeeping
    assert not passages["columns: region, product, units, price"].bookkeeping  # as its items
    # a list too long for one passage, or of long items, keeps an item a passage
    many = {"hits": [f"file{i}.txt" for i in range(120)], "files_scanned": 3}
    texts = [p.text for p in result_passages(tool_turn("q", "search", {}, many))]
    assert "hits: file7.txt" in texts
