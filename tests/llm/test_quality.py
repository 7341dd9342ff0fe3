"""Garbage replies are recognised: loops (while decoding and in finished text), cut-off
replies, placeholders copied from the prompt, and lokal's own instructions echoed back."""

from lokal.llm.prompts import build_prompt_messages, instruction_texts
from lokal.llm.quality import loop_period, reply_problem, text_loop, trim_loop


def test_a_repeated_block_of_tokens_is_a_loop():
    assert loop_period([5, 6, 7] * 10) == 3
    assert loop_period([1] * 30) == 1
    assert loop_period(list(range(40)) + [9, 8] * 12) == 2


def test_varied_tokens_and_short_repeats_are_not_a_loop():
    assert loop_period(list(range(100))) is None
    assert loop_period([1, 2, 1, 2]) is None  # under 24 tokens
    assert loop_period([7, 7, 7, 1, 2, 3] * 2 + list(range(30))) is None


def test_a_text_that_ends_in_a_loop_names_the_repeated_unit():
    text = "The best place is " + "la Chatelet, " * 40
    assert text_loop(text).strip() == "la Chatelet,"
    assert text_loop("A normal answer that says what the file contains, once.") is None


def test_cut_off_and_looping_replies_are_problems():
    assert "cut off" in reply_problem("The answer is", finish_reason="length")
    assert "loop" in reply_problem("la la la", finish_reason="repetition")
    looping = "1. item\n" + "2. the same line again\n" * 30
    assert "repeats" in reply_problem(looping, finish_reason="stop")


def test_placeholders_from_the_answer_form_are_problems():
    for text in ("<your answer>", "...", "your answer", " <answer> "):
        assert "placeholder" in reply_problem(text, finish_reason="stop")


def test_a_template_slot_left_unfilled_is_a_problem():
    # development tasks m10 ("Thank you, that was helpful!") and weather: the answers
    # "The weather forecast for the next 24 hours is {{weather_forecast_24}}." and "The
    # weather in London is currently [day] at [location]" were trusted as the model's
    for text in (
        "The weather forecast for the next 24 hours is {{weather_forecast_24}}.",
        "The weather in London is currently [day] at [location] with [days] available.",
        "Your order ships on {{ ship_date }}.",
    ):
        assert "template's slot" in reply_problem(text, finish_reason="stop")
    # brackets and braces that are no slot: a link, a number, a checkbox, code, [sic]
    for text in (
        "See [the docs](https://example.com) and [1].",
        "Set [x] when done.",
        "The list [a, b] is sorted.",
        "He wrote [sic] it.",
        "Use `{{ name }}` in a Jinja template.",
        "```\nreturn items[index]\n```",
        "x = items[index]",
        'The JSON is {"a": 1}.',
    ):
        assert reply_problem(text, finish_reason="stop") is None, text


def test_lokal_own_reminder_copied_back_is_a_problem():
    messages = [
        {"role": "user", "content": "Read notes.txt"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_001", "name": "file_reader", "args": {"path": "x"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "call_001",
            "name": "file_reader",
            "status": "success",
            "content": '{"status": "success", "output": "hi", "error": null}',
        },
    ]
    reminder = build_prompt_messages(messages, [], mode="constrained")[-1]["content"]
    echoed = reminder.split(". ")[2]  # "Do not repeat the completed tool calls."
    assert echoed.startswith("Do not repeat")
    problem = reply_problem(echoed, finish_reason="stop", instructions=instruction_texts())
    assert problem and "copies the instructions" in problem
    # a paraphrase that keeps most words is a copy too
    paraphrase = "Do not repeat the completed tool call."
    assert reply_problem(paraphrase, finish_reason="stop", instructions=instruction_texts())


def test_an_answer_that_copies_a_tool_result_or_the_user_is_fine():
    answer = "The quarterly review is on Friday at 10:00, in the big meeting room."
    assert reply_problem(answer, finish_reason="stop", instructions=instruction_texts()) is None
    assert reply_problem("Paris.", finish_reason="stop", instructions=instruction_texts()) is None


def test_a_looping_tail_is_cut_back_to_one_repetition():
    # the loop of tests/test_staged_model (en_irrelevant_weather): a clause with no sentence end
    looped = "Bonjour, le monde est toujours l'étoile" + ", le monde est toujours l'étoile" * 2
    assert trim_loop(looped) == "Bonjour, le monde est toujours l'étoile"
    # a loop caught mid-sentence keeps the repetition up to its sentence end
    numbered = "The steps are listed here." + " Step one is done." * 3 + " Step one is do"
    assert trim_loop(numbered) == "The steps are listed here. Step one is done."
    assert reply_problem(trim_loop(looped), finish_reason="stop") is None


def test_no_loop_or_too_little_left_is_not_trimmed():
    assert trim_loop("A plain answer that says one thing once.") is None
    assert trim_loop("go go go go go go go go") is None
