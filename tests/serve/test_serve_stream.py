"""The content streamer: prose as it comes, marker text held back, JSON envelopes decoded,
calls never streamed as text; and the `lokal serve` command line."""

from __future__ import annotations

import pytest

from lokal.cli import main
from lokal.serve.stream import ContentStreamer, tool_call_chunks, visible_content


def _feed(pieces, streamer=None):
    streamer = streamer or ContentStreamer()
    streamer.start(True)
    return streamer, [streamer.feed(piece) for piece in pieces]


def test_prose_streams_as_it_comes():
    streamer, sent = _feed(["Hello", " wor", "ld."])
    assert sent == ["Hello", " wor", "ld."]
    assert streamer.finish("Hello world.") == ("", False)


def test_text_that_could_begin_a_marker_is_held():
    _, sent = _feed(["Sure <tool", '_call>{"name": "f"}'])
    assert sent == ["Sure", ""]  # the preamble only; the call is never text
    assert visible_content("<tool") == ""
    assert visible_content("<tool_call>{") is None
    assert visible_content("[get_weather(") is None
    assert visible_content("[get") == ""
    assert visible_content("[1, 2] are numbers") == "[1, 2] are numbers"
    assert visible_content("<b>bold</b> text") == "<b>bold</b> text"


def test_a_json_envelope_streams_its_content_never_the_json():
    _, sent = _feed(['{"con', 'tent": "Hel', "lo", ' there"}'])
    assert "".join(sent) == "Hello there" and '"' not in "".join(sent)
    _, sent = _feed(['{"tool_calls": [{"name": "f", "args": {"content": "x"}}]}'])
    assert sent == [""]


def test_a_retry_continues_only_past_what_was_sent():
    streamer, _ = _feed(["The answer", " is 4."])
    streamer.start(True)  # the retry writes it again
    assert streamer.feed("The answer") == ""
    assert streamer.feed(" is 4. Done.") == " Done."
    streamer.start(True)
    assert streamer.feed("Something else") == ""  # diverged: nothing more live
    assert streamer.finish("Something else") == ("", True)


def test_generations_that_continue_a_prefix_are_not_streamed():
    streamer = ContentStreamer()
    streamer.start(False)  # a staged argument step
    assert streamer.feed('"Paris"') == ""


def test_tool_call_chunks_index_id_name_then_arguments():
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": '{"x": 1}'}},
    ]
    deltas = tool_call_chunks(calls, piece=3)
    first = deltas[0]["tool_calls"][0]
    assert first == {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    rebuilt = {}
    for delta in deltas:
        part = delta["tool_calls"][0]
        rebuilt[part["index"]] = rebuilt.get(part["index"], "") + part["function"]["arguments"]
    assert rebuilt == {0: "{}", 1: '{"x": 1}'}


def test_serve_command_line_errors_are_one_line(capsys):
    assert main(["serve", "--port", "0"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["serve", "--profile", "no-such-profile"]) == 2
    assert "no-such-profile" in capsys.readouterr().err


def test_serve_help_lists_its_options(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for option in ("--host", "--port", "--api-key", "--max-queue", "--max-body-bytes", "--log"):
        assert option in out
