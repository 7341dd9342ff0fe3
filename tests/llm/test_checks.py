"""The answer checks (lokal.llm.checks), each built from an output users saw (issue 20)."""

from __future__ import annotations

import json

from lokal.llm.checks import (
    AnswerContext,
    check_answer,
    counting,
    glued_words,
    quoted_from,
    quotes_any,
    repeated_blocks,
    restated,
    stutter,
    unfinished,
    wrong_arithmetic,
)

INTRO = (
    "An agent is made of five parts: a runtime loop, skills, a tool layer, an LLM decision "
    "and memory."
)


def actions(findings):
    return [(f.check, f.action) for f in findings]


def test_make_run_answer_with_a_label_repeated_three_times_is_kept_once_without_the_label():
    # make run: the file's first paragraph, then "Most relevant: Memory - ..." three times
    block = "Most relevant: Memory - documents the agent keeps between runs."
    text = f"{INTRO}\n{block}\n{block}\n{block}"
    ctx = AnswerContext(question="What is an agent made of?", sources=[INTRO])
    kept, findings = check_answer(text, ctx)
    assert "Most relevant" not in kept
    assert kept.count("Memory - documents the agent keeps between runs.") == 1
    assert kept.startswith("An agent is made of five parts")
    assert ("labels", "trimmed") in actions(findings)
    assert ("repeated_block", "trimmed") in actions(findings)


def test_a_block_repeated_inside_an_answer_is_kept_once():
    fact = "The quarterly review is on Thursday, 14 March, in room 4."
    block = "Please bring the sales figures and the slides for the team."
    text = f"{fact} {block} {block} {block}"
    kept, repeated = repeated_blocks(text)
    assert kept == f"{fact} {block}"
    assert repeated == [block]


def test_a_sentence_that_contradicts_the_file_is_dropped():
    source = "notes.txt: The quarterly review is on Thursday, 14 March, in room 4."
    text = "The quarterly review is on Thursday, 14 March. The review was moved to Monday, 3 June."
    ctx = AnswerContext(question="When is the quarterly review?", sources=[source])
    kept, findings = check_answer(text, ctx)
    assert kept == "The quarterly review is on Thursday, 14 March."
    assert ("contradiction", "trimmed") in actions(findings)


def test_a_total_the_table_does_not_hold_is_retried():
    # "The total number of units sold per region is 12." (truth: East 52, West 49, ...)
    source = '{"groups": {"East": 52, "West": 49, "North": 38, "South": 70}}'
    text = "The total number of units sold per region is 12."
    ctx = AnswerContext(question="Total units sold per region?", sources=[source])
    _, findings = check_answer(text, ctx)
    assert findings[-1].check == "contradiction" and findings[-1].action == "retry"
    assert "12" in findings[-1].detail
    assert check_answer("East 52, West 49, North 38, South 70.", ctx)[1] == []


def test_an_answer_that_sends_the_user_to_a_tool_already_run_is_retried():
    # development task m12: "You can use the table_analyzer tool to extract the desired
    # information." after table_analyzer had returned the summary
    source = '{"overview": "a table of 20 rows and 4 columns: region, product, units, price"}'
    question = "分析一下 data/sales.csv 这个表格。"
    text = "The data is in CSV format. You can use the table_analyzer tool to extract it."
    ctx = AnswerContext(question=question, sources=[source], called=frozenset({"table_analyzer"}))
    _, findings = check_answer(text, ctx)
    assert findings[-1].check == "defers_to_tool" and findings[-1].action == "retry"
    # a tool that did not run may be suggested; naming the tool that ran is no deferral
    other = AnswerContext(question=question, sources=[source], called=frozenset({"calculator"}))
    assert not any(f.check == "defers_to_tool" for f in check_answer(text, other)[1])
    for said in (
        "table_analyzer found a table of 20 rows and 4 columns: region, product, units, price.",
        "Using table_analyzer, the table has 20 rows and 4 columns: region, product, units.",
    ):
        assert not any(f.check == "defers_to_tool" for f in check_answer(said, ctx)[1]), said
    for sends in ("Please run table_analyzer on it.", "The rows are many. Try table_analyzer."):
        assert check_answer(sends, ctx)[1][-1].check == "defers_to_tool", sends


def test_numbers_from_the_question_and_decimals_are_not_contradictions():
    ctx = AnswerContext(question="What is 17 * 23 + 4?", sources=["result: 395"])
    assert check_answer("17 * 23 + 4 = 395.", ctx)[1] == []
    ctx = AnswerContext(question="What is pi times 1?", sources=["result: 3.14"])
    assert check_answer("The result is 3.14.", ctx)[1] == []


def test_the_most_relevant_data_stutter_is_retried():
    text = "The most relevant data is the most relevant data: sales by region."
    assert stutter(text) == "the most relevant data"
    _, findings = check_answer(text, AnswerContext(question="group by region"))
    assert actions(findings) == [("stutter", "retry")]
    assert stutter("The file lists the east region and the west region.") is None


def test_words_glued_together_are_retried():
    assert glued_words("…themostrelevantdata…") == "themostrelevantdata"
    assert glued_words("Ada.JR.1985.1.1.0.0.0.") is not None
    # long real words and identifiers are not glued words
    assert glued_words("Internationalization and responsibilities matter.") is None
    assert glued_words("See https://example.com/a.b.c.d.e.f for details.") is None
    _, findings = check_answer("…themostrelevantdata…", AnswerContext())
    assert actions(findings) == [("glued_words", "retry")]


def test_an_answer_that_stops_mid_sentence_is_retried():
    # after memory add "The staging server is called tortoise.": "The staging server is called"
    assert unfinished("The staging server is called")
    assert unfinished("The totals are:")
    assert not unfinished("The staging server is called tortoise.")
    assert not unfinished("395")
    assert not unfinished("Paris")
    _, findings = check_answer("The staging server is called", AnswerContext())
    assert actions(findings) == [("unfinished", "retry")]


def test_memory_notes_and_profile_lines_are_not_recited():
    # "What is 5*5?" with a global memory profile
    system = "The user's name is Ada Lovelace.\nAnswer in English."
    text = "The user's name is Ada Lovelace. Answer in English. The result of the calculator is 25."
    ctx = AnswerContext(question="What is 5*5?", sources=["result: 25"], system=system)
    kept, findings = check_answer(text, ctx)
    assert kept == "The result of the calculator is 25."
    assert ("echoed_context", "trimmed") in actions(findings)
    # a note that answers the question stays
    ctx = AnswerContext(question="What is my name?", system=system)
    kept, findings = check_answer("The user's name is Ada Lovelace.", ctx)
    assert kept == "The user's name is Ada Lovelace." and findings == []


def test_an_appended_tool_result_label_is_removed():
    text = "17 * 23 + 4\n\n(From the tool results: result: 395)"
    kept, _ = check_answer(text, AnswerContext(question="What is 17 * 23 + 4?"))
    assert "From the tool results" not in kept


def test_a_plain_good_answer_passes_untouched():
    ctx = AnswerContext(question="What is an agent made of?", sources=[INTRO])
    assert check_answer(INTRO, ctx) == (INTRO, [])
    assert check_answer("你好，我是助手。", AnswerContext()) == ("你好，我是助手。", [])


def test_trimming_everything_asks_for_a_retry():
    ctx = AnswerContext(question="hi", system="The user's name is Ada Lovelace.")
    _, findings = check_answer("The user's name is Ada Lovelace.", ctx)
    assert actions(findings) == [("echoed_context", "trimmed"), ("echoed_context", "retry")]
    assert findings[-1].detail == "nothing is left of the answer once trimmed"


def test_citation_markers_are_not_values():
    ctx = AnswerContext(question="Can readers work?", sources=["Since 2010 readers read."])
    assert check_answer("Readers keep reading [1].", ctx)[1] == []
    assert check_answer("Readers keep reading [2]. Since 2011.", ctx)[1][0].detail.startswith(
        "dropped a sentence whose 2011"
    )


def test_a_fact_said_again_in_other_words_is_kept_once():
    # "the right fact, a 45-token block repeated 3 times": the repeats are not always
    # word for word
    text = (
        "The quarterly review is on Friday at 10:00. The review is on Friday. "
        "Please remember the quarterly review on Friday."
    )
    ctx = AnswerContext(question="When is the quarterly review?", sources=["Friday at 10:00"])
    kept, findings = check_answer(text, ctx)
    # the third sentence adds a request: kept
    assert kept == (
        "The quarterly review is on Friday at 10:00. "
        "Please remember the quarterly review on Friday."
    )
    assert ("restated", "trimmed") in actions(findings)


def test_sentences_that_add_something_are_kept():
    for text in (
        "The review is on Friday. It starts at 10:00.",
        "East sold 52 units. West sold 49 units.",
        "Model - reads the conversation.\nTools - functions the model can call.",
    ):
        assert restated(text) == (text, [])


def test_an_answer_that_only_repeats_the_questions_numbers_is_retried():
    # "What is 17 * 23 + 4?" answered "17 * 23 + 4" after the calculator returned 395
    ctx = AnswerContext(question="What is 17 * 23 + 4?", sources=["result: 395"])
    _, findings = check_answer("17 * 23 + 4", ctx)
    assert actions(findings) == [("result_left_out", "retry")]
    assert "395" in findings[0].detail
    # "Work out 2.5 * 40 for me." answered "2.5"; "36 / 4" answered "36"
    ctx = AnswerContext(question="Work out 2.5 * 40 for me.", sources=["result: 100"])
    assert actions(check_answer("2.5", ctx)[1]) == [("result_left_out", "retry")]
    assert check_answer("2.5 * 40 = 100", ctx)[1] == []
    # "144 / 12 - 3" answered "144.0000000000000001" (the question's 144, not the result 9)
    ctx = AnswerContext(question="Compute 144 divided by 12, minus 3.", sources=["result: 9"])
    assert actions(check_answer("144.0000000000000001", ctx)[1]) == [("result_left_out", "retry")]
    # an answer without numbers, or a document full of numbers, is not this check's business
    checked = {f.check for f in check_answer("The calculator returned a value.", ctx)[1]}
    assert "result_left_out" not in checked  # (it is ungrounded: another check's business)
    # an answer that adds a name is not a copy of the question
    ctx = AnswerContext(question="Who won the 2022 final?", sources=["Argentina won 4-2"])
    assert check_answer("Argentina won the 2022 final.", ctx)[1] == []
    table = "region,units\nEast,52\nWest,49\nNorth,38\nSouth,70"
    ctx = AnswerContext(question="Which of the 4 regions sold most?", sources=[table])
    assert check_answer("South, one of the 4 regions.", ctx)[1] == []


def test_an_answer_that_says_the_question_back_is_retried():
    # "中国的首都是哪里？" answered "中国的首都是哪里？"; "请告诉我中国首都的名字。" with itself
    ctx = AnswerContext(question="中国的首都是哪里？")
    assert actions(check_answer("中国的首都是哪里？", ctx)[1]) == [("question_echo", "retry")]
    ctx = AnswerContext(question="请告诉我中国首都的名字。")
    assert actions(check_answer("请告诉我中国首都的名字；", ctx)[1]) == [("question_echo", "retry")]
    # a greeting answered in kind is not an echo
    assert check_answer("Bye.", AnswerContext(question="Bye!"))[1] == []
    assert check_answer("Hello there!", AnswerContext(question="Hello there"))[1] == []
    # said back, then answered: the echo goes, the answer stays
    ctx = AnswerContext(question="What is the capital of France?")
    kept, findings = check_answer("What is the capital of France? It is Paris.", ctx)
    assert kept == "It is Paris." and actions(findings) == [("question_echo", "trimmed")]


def test_a_which_file_question_answered_without_a_file_is_retried():
    # "Which file in the workspace mentions the team outing?" answered with notes.txt's lines
    ctx = AnswerContext(
        question="Which file in the workspace mentions the team outing?",
        sources=["path: notes.txt, line: 5, snippet: Remember to check the weather"],
    )
    _, findings = check_answer("Remember to check the weather before the outing.", ctx)
    assert [(f.check, f.action) for f in findings] == [("file_unnamed", "retry")]
    assert check_answer("It is notes.txt.", ctx)[1] == []
    # a question that does not ask for a file, or results that name none, pass
    other = AnswerContext(question="When is the outing?", sources=ctx.sources)
    assert check_answer("Remember to check the weather before the outing.", other)[1] == []
    none = AnswerContext(question=ctx.question, sources=["count: 3"])
    checked = {f.check for f in check_answer("Remember to check the weather.", none)[1]}
    assert "file_unnamed" not in checked
    # the file a hit is about, not one its text mentions in passing ("data/sales.csv")
    hit = '{"results": [{"path": "notes.txt", "line": 5, "snippet": "team outing"}]}'
    read = AnswerContext(question=ctx.question, sources=[hit])
    copied = "The sales table lives in data/sales.csv. Check the weather before the outing."
    assert [f.check for f in check_answer(copied, read)[1]] == ["file_unnamed"]
    assert check_answer("notes.txt mentions the team outing.", read)[1] == []


def test_a_question_about_each_region_answered_with_one_is_retried():
    # "Using data/sales.csv, total units sold per region?" answered with one region
    groups = (
        '{"operation": "groupby", "groups": [{"region": "East", "sum_units": 52}, '
        '{"region": "North", "sum_units": 38}, {"region": "South", "sum_units": 70}, '
        '{"region": "West", "sum_units": 49}]}'
    )
    ctx = AnswerContext(question="Total units sold per region?", sources=[groups])
    _, findings = check_answer("The South sold 70 units.", ctx)
    assert [(f.check, f.action) for f in findings] == [("part_of_each", "retry")]
    assert "East, North, South, West" in findings[0].detail
    every = "East 52, North 38, South 70, West 49."
    assert check_answer(every, ctx)[1] == []
    # "which region sold most" asks for one
    one = AnswerContext(question="Which region sold the most units?", sources=[groups])
    assert check_answer("The South sold 70 units.", one)[1] == []


def test_a_skill_description_recited_in_other_words_is_dropped():
    # "Thank Tom in a single short sentence." was answered with the weather skill's listing
    system = (
        "You can use these skills:\n"
        "- weather-forecast: Current weather and a multi-day forecast for Beijing, Shanghai, "
        "Shenzhen, London and New York, from offline data shipped with the skill."
    )
    ctx = AnswerContext(question="Thank Tom in a single short sentence.", system=system)
    text = (
        "The weather in Beijing, Shanghai, Shenzhen, London, and New York, from offline data "
        "shipped with the weather_forecast skill, is currently 20."
    )
    _, findings = check_answer(text, ctx)
    assert findings[0].check == "echoed_context"
    assert findings[-1].action == "retry"  # nothing is left
    kept, _ = check_answer("Thank you, Tom! " + text, ctx)
    assert kept.strip() == "Thank you, Tom!"
    # the question about the weather may use the description's words
    weather = AnswerContext(question="What's the weather in Beijing?", system=system)
    assert check_answer("The weather in Beijing is sunny, 20 degrees.", weather)[1] == []


def test_quotes_any_tells_a_copy_of_the_closest_passages_from_another():
    closest = ["Tools the agent can use: file_reader, calculator.", "calculator | arithmetic"]
    assert quotes_any("Tools the agent can use: file_reader, calculator.", closest)
    assert quotes_any("It says: calculator | arithmetic. Ask away.", closest)
    assert not quotes_any("This guide shows how to work with the local agent runtime.", closest)


def test_an_answer_without_the_computed_value_is_retried():
    # "Look at notes.txt for the number of rows in the sales table, then add 7 to that
    # number." read the file, computed 7 + 20 = 27, and answered with the notes file
    question = "Look at notes.txt for the number of rows in the sales table, then add 7 to it."
    notes = json.dumps({"path": "notes.txt", "content": "The sales table (20 rows)."})
    computed = json.dumps({"expression": "7 + 20", "read_as": "7 + 20", "result": 27})
    ctx = AnswerContext(question=question, sources=[notes, computed])
    _, findings = check_answer("The sales table lives in data/sales.csv (20 rows).", ctx)
    assert actions(findings) == [("computation_left_out", "retry")]
    assert "27" in findings[0].detail
    assert check_answer("20 + 7 = 27.0", ctx)[1] == []
    # a calculator result beside a question that computes nothing ("Say hello to Lee") or a
    # bigger record that happens to have a result field are not this check's business
    ctx = AnswerContext(question="Say hello to Lee.", sources=[computed])
    assert check_answer("Hello, Lee!", ctx)[1] == []
    big = json.dumps({"result": 3, "a": 1, "b": 2, "c": 3, "d": 4})
    ctx = AnswerContext(question="How many rows?", sources=[big])
    assert check_answer("There are many.", ctx)[1] == []
    # a result that is a bare number or a list is no record (it raised TypeError)
    ctx = AnswerContext(question=question, sources=["3", "[1, 2]", "not json"])
    assert check_answer("Three.", ctx)[1] == []


def test_an_answer_that_uses_nothing_the_results_say_is_retried():
    # "Search the workspace for the word Gizmo." answered with the search's bookkeeping
    # ("truncated": false) told in words
    hits = {"query": "Gizmo", "results": [{"path": "data/sales.csv", "line": 4,
            "snippet": "East,Gizmo,8,7.25"}], "files_matched": 1, "truncated": False}  # fmt: skip
    ctx = AnswerContext(
        question="Search the workspace for the word Gizmo.", sources=[json.dumps(hits)]
    )
    text = "It's truncated to just one line of text with no additional information left out."
    assert actions(check_answer(text, ctx)[1]) == [("ungrounded", "retry")]
    assert check_answer("Gizmo is in data/sales.csv, line 4.", ctx)[1] == []
    # the labels of a result's groups are what it says too; a short answer is not judged
    totals = AnswerContext(question="Units per region?", sources=['{"East": 52, "West": 49}'])
    assert check_answer("East sold the most units.", totals)[1] == []
    assert check_answer("Yes, it does.", ctx)[1] == []
    # a short number of the results grounds it ("6 * 7 is 42" after 42.0)
    computed = AnswerContext(
        question="What is 6 * 7, and what does notes.txt say?", sources=["42.0"]
    )
    text = "6 * 7 is 42; notes.txt could not be read (no such file)."
    assert check_answer(text, computed)[1] == []
    # an answer in Chinese over English results is not judged by shared words
    zh = AnswerContext(question="在工作区里搜索 Gizmo。", sources=ctx.sources)
    assert check_answer("文件里提到了这个产品的销量信息。", zh)[1] == []


def test_an_answer_that_counts_on_is_retried():
    # the held-out "days in a week" task, forced without tools: "The answer is 18. The answer
    # is 19. ..." passed every check before
    text = "The answer is 18. The answer is 19. The answer is 20. The answer is 21."
    assert counting(text) == "the answer is #"
    _, findings = check_answer(text, AnswerContext(question="How many days are in a week?"))
    assert actions(findings) == [("counting", "retry")]
    # one number per region, or the same sentence twice, is no counting
    assert counting("East sold 52 units. West sold 49 units. North sold 38 units.") is None
    assert counting("Week 1 starts on Monday. Week 2 starts on Monday.") is None
    # a numbered list is no counting
    assert counting("Three points:\n1. Tools\n2. Memory\n3. The loop") is None
    # inside one sentence, clause after clause ("How many days are in a week?" on the
    # development machine, cut off at the token limit)
    said = "1 day is 7 days in a week, 2 days are 2 weeks, 3 days are 3 weeks, 4 days are 4 weeks"
    assert counting(said) == "# days are # weeks"
    # a total per region, or thousands written with commas, are no counting
    assert counting("East sold 52 units, West sold 49 units, North sold 38 units.") is None
    assert counting("It costs 1,200 dollars, 1,300 with tax.") is None


def test_a_copy_of_a_line_that_follows_a_newline_in_a_json_result_is_quoted():
    # the file's text inside the JSON result has "\\n" before each line: the first line
    # after it read "nThis guide ...", and a copy of it was labelled the model's own answer
    source = json.dumps(
        {
            "path": "docs/agent_guide.md",
            "content": "# Agent guide\n\n"
            "This guide shows how to work with the local agent runtime.\n",
        }
    )
    assert quoted_from("This guide shows how to work with the local agent runtime.", [source])
    assert not quoted_from("This guide shows how to cook rice.", [source])


def test_an_answer_whose_own_arithmetic_is_false_is_retried():
    # "A crate holds 35 bottles. How many bottles fit in 8 crates?" answered without a call
    text = "A crate holds 35 bottles. 8 crates can hold 35 * 8 = 270 bottles."
    assert wrong_arithmetic(text) == ("35 * 8", 280.0, "270")
    _, findings = check_answer(text, AnswerContext(question="How many bottles fit?"))
    assert actions(findings) == [("wrong_arithmetic", "retry")]
    assert "35 * 8 is 280" in findings[0].detail
    # true sums, rounded ones, thousands with commas and "x" for times all hold
    assert wrong_arithmetic("35 * 8 = 280; 10 / 3 = 3.33; 1,200 + 300 = 1,500; 2 x 3 = 6") is None
    # a date or a version is no sum
    assert wrong_arithmetic("On 2023-01-01 version 1.2 = 1.2 shipped.") is None
    assert wrong_arithmetic("1 / 0 = 3") is None  # simpleeval refuses it: nothing to say
    assert wrong_arithmetic("0x10 = 16 in hexadecimal") is None  # "x" for times has spaces


def test_numbers_run_together_are_glued():
    # "What is 144 divided by 12?" answered without a call
    assert glued_words("144.000000000000000144.000000000000000144.000") is not None
    assert glued_words("Server 192.168.100.200 runs v1.2.3, pi is 3.14159265358979.") is None


def test_a_number_glued_to_the_next_ones_digits_is_retried_unless_a_result_holds_it():
    # development task m11: "帮我算一下 15 加 27。" answered "15 + 27 = 42.0000000000000015 +
    # 27 = 42." after result: 42
    ctx = AnswerContext(question="帮我算一下 15 加 27。", sources=['{"result": 42}'])
    _, findings = check_answer("15 + 27 = 42.0000000000000015 + 27 = 42.", ctx)
    assert actions(findings) == [("glued_words", "retry")]
    # d22: "How many days are in a week?" answered with a clock time run on
    week = AnswerContext(question="How many days are in a week?")
    _, findings = check_answer("2022-01-01 23:59:56.9888888888888899", week)
    assert actions(findings) == [("glued_words", "retry")]
    assert check_answer("Two thirds is 0.6666666666666666.", week)[1] == []  # no other digit
    # a float the calculator returned is its own: 0.1 + 0.2
    floats = AnswerContext(
        question="What is 0.1 + 0.2?", sources=['{"result": 0.30000000000000004}']
    )
    assert check_answer("0.1 + 0.2 is 0.30000000000000004.", floats)[1] == []


def test_a_number_said_again_with_one_word_is_trimmed():
    # development task m04: the answer said 84 three times
    ctx = AnswerContext(question="If a box holds 6 eggs, how many eggs are in 14 boxes?")
    text, findings = check_answer(
        "The result of the calculator is 84. The answer is 84. The calculator is 84.", ctx
    )
    assert text == "The result of the calculator is 84."
    assert actions(findings) == [("restated", "trimmed")]
    # a sentence with a new number, or with more to say, stays
    kept = "The week has 7 days. Monday is day 1. The weekend has 2 days of rest, after day 5."
    assert check_answer(kept, ctx)[0] == kept


def test_chinese_in_the_answer_to_an_english_question_is_retried():
    # the Chinese first line of docs/agent_intro.txt, rewritten, before the English lead
    text = (
        "Agent 系统通常由模型、工元、记忆和执行循环组成。工元被模型创建为一个系统。 "
        "An agent system is usually built from four parts: Model, Tools, Memory, Loop."
    )
    ctx = AnswerContext(question="In docs/agent_intro.txt, what does the Loop part repeat?")
    assert actions(check_answer(text, ctx)[1])[-1] == ("wrong_language", "retry")
    # make run on the CI machine: Chinese and English in one sentence, passed as the
    # model's answer
    mixed = (
        "工元被模板创建为一个系统，可以使用任何方式来实现，can be used to implement any "
        "function that can take a JSON object as input and return the results."
    )
    intro = json.dumps(
        {"content": "Agent 系统通常由模型、工具、记忆和执行循环组成。"}, ensure_ascii=False
    )
    make_run = AnswerContext(
        question="Use the file_reader tool to read docs/agent_intro.txt.", sources=[intro]
    )
    assert actions(check_answer(mixed, make_run)[1]) == [("wrong_language", "retry")]
    # a quote of the file's Chinese words inside an English sentence is the file's
    quote = "The file begins: Agent 系统通常由模型、工具。"
    assert "wrong_language" not in [f.check for f in check_answer(quote, make_run)[1]]
    # a Chinese name inside English, or Chinese answering a Chinese question, stays
    assert (
        check_answer("The capital is 北京 (Beijing).", AnswerContext(question="Capital?"))[1] == []
    )
    zh = AnswerContext(question="中国的首都是哪里？")
    assert "wrong_language" not in [f.check for f in check_answer("首都是北京。", zh)[1]]


def test_a_short_sentence_said_over_and_over_is_no_answer():
    # "In docs/agent_intro.txt, what does the Loop part repeat?" answered "4. 4. 4. 4."
    _, findings = check_answer("4. 4. 4. 4.", AnswerContext(question="What does it repeat?"))
    assert actions(findings) == [("repeated_block", "retry")]
    # checked on what the trims left ("Most relevant:" removed, three "4." remain)
    ctx = AnswerContext(question="In docs/agent_intro.txt, what does the Loop part repeat?")
    assert actions(check_answer("4. Most relevant: 4. 4.", ctx)[1]) == [
        ("labels", "trimmed"),
        ("repeated_block", "retry"),
    ]
    # twice, or one short answer, is not
    assert check_answer("Yes. Yes.", AnswerContext(question="Is it?"))[1] == []
    assert check_answer("4.", AnswerContext(question="How many parts?"))[1] == []


def test_a_question_for_three_rows_answered_with_one_is_retried():
    # "In data/sales.csv, what are the three rows with the most units?" was answered with
    # the second of the three rows (held-out tasks, 2026-12-06)
    top = (
        '{"operation": "topk", "column": "units", "k": 3, "rows": ['
        '{"region": "South", "product": "Gizmo", "units": 21, "price": 7.25}, '
        '{"region": "West", "product": "Widget", "units": 20, "price": 2.5}, '
        '{"region": "South", "product": "Widget", "units": 18, "price": 2.5}]}'
    )
    question = "In data/sales.csv, what are the three rows with the most units?"
    ctx = AnswerContext(question=question, sources=[top])
    _, findings = check_answer("Region: West, product: Widget, units: 20, price: 2.5", ctx)
    assert [(f.check, f.action) for f in findings] == [("part_of_each", "retry")]
    assert "3" in findings[0].detail
    every = "South Gizmo with 21 units, West Widget with 20, and South Widget with 18."
    assert check_answer(every, ctx)[1] == []
    # a value two rows share ("South", "Widget", 2.5) names neither of them
    shared = AnswerContext(question="Which are the top two rows by units?", sources=[top])
    assert [f.check for f in check_answer("South, Widget, 2.5", shared)[1]] == ["part_of_each"]
    assert check_answer("Gizmo (21 units) and the West Widget (20).", shared)[1] == []
    # a question for one row asks for one
    one = AnswerContext(question="Which row has the most units?", sources=[top])
    assert check_answer("South, Gizmo, 21 units.", one)[1] == []


def test_a_date_or_time_for_a_question_that_asks_neither_is_retried():
    # development task d22_fact: "How many days are in a week?" answered
    # "2022-01-01 23:59:56.98388" (the model's own words), and the run said it answered
    for question, answer in [
        ("How many days are in a week?", "2022-01-01 23:59:56.98388"),
        ("Who wrote Hamlet?", "2023-01-01T00:00:00Z"),
        ("How many legs does a spider have?", "12/31/2023."),
    ]:
        findings = check_answer(answer, AnswerContext(question=question))[1]
        assert actions(findings)[-1] == ("time_for_no_time", "retry"), (question, answer)
    for question, answer in [
        ("What is the date today?", "2022-01-01"),  # asked for
        ("What time is it now?", "14:30"),
        ("现在几点？", "14:30"),
        ("When is the quarterly review?", "2026-03-14"),
        ("How many days are in a week?", "7"),  # no date
        ("How many days are in a week?", "There are 7 days, as counted on 2022-01-01."),
    ]:
        findings = check_answer(answer, AnswerContext(question=question))[1]
        assert "time_for_no_time" not in [f.check for f in findings], (question, answer)


def test_a_run_whose_every_reply_is_a_date_for_no_date_says_it_has_no_answer():
    # the same answer every time: the run ends with a labelled error, not "the model answered"
    from helpers import MODEL_CONFIG, envelope
    from lokal.config import load_profile
    from lokal.llm.backends.scripted import ScriptedBackend
    from lokal.llm.decide import generate_ai_message

    profile = load_profile(MODEL_CONFIG, "smollm2-135m-free")
    messages = [{"role": "user", "content": "How many days are in a week?"}]
    stamp = envelope(content="2022-01-01 23:59:56.98388")
    backend = ScriptedBackend([stamp] * (profile.tool_calling.max_retries + 1))
    result = generate_ai_message(profile, messages, [], backend=backend)
    assert not result.ok
    assert result.error.type == "bad_reply" and "asks for neither" in result.error.message
    # and a later reply that answers is taken
    backend = ScriptedBackend([stamp, envelope(content="A week has 7 days.")])
    result = generate_ai_message(profile, messages, [], backend=backend)
    assert result.ok and result.ai_message["content"] == "A week has 7 days."
