"""``lokal serve`` never fetches a URL that a client names in a schema (issue 19, item 1): a
tool or a response_format whose ``$ref`` points at a listening socket on 127.0.0.1 is a 400
naming the tool, and the socket sees no connection."""

from __future__ import annotations

import json

import httpx
import pytest
from serve_support import KEY, QUESTION, calls_reply

from tripwire import Tripwire, tool_with_ref

pytestmark = pytest.mark.slow


def _post(served, body):
    return httpx.post(
        served.url + "/chat/completions",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=20,
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_with_a_remote_ref_is_a_400_naming_the_tool_and_nothing_is_fetched(
    serve, profile, stream
):
    served = serve([calls_reply(("read_doc", {"path": "a.txt"}))] * 2)
    with Tripwire() as wire:
        body = {
            "model": profile.name,
            "messages": QUESTION,
            "tools": [tool_with_ref(wire.url("/internal-admin?secret=1"))],
            "tool_choice": "required",
            "stream": stream,
        }
        response = _post(served, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "tools[0].function.parameters"
    assert "tool 'read_doc'" in error["message"]
    assert "refers outside the schema" in error["message"]
    assert served.backend.requests == []  # refused before any model ran
    assert wire.connections == 0 and wire.requests == []


def test_a_response_format_with_a_remote_ref_is_a_400_and_nothing_is_fetched(serve, profile):
    served = serve(['{"content": {"a": "x"}}'])
    with Tripwire() as wire:
        body = {
            "model": profile.name,
            "messages": QUESTION,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": {"type": "object", "properties": {"a": {"$ref": wire.url()}}},
                },
            },
        }
        response = _post(served, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "response_format.json_schema.schema"
    assert "refers outside the schema" in error["message"]
    assert served.backend.requests == []
    assert wire.connections == 0


def test_a_tool_with_local_refs_is_served(serve, profile):
    served = serve([calls_reply(("book", {"address": {"city": "Oslo"}}))])
    tool = {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a room.",
            "parameters": {
                "type": "object",
                "properties": {"address": {"$ref": "#/$defs/Address"}},
                "required": ["address"],
                "$defs": {
                    "Address": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    }
                },
            },
        },
    }
    body = {"model": profile.name, "messages": QUESTION, "tools": [tool]}
    response = _post(served, body)
    assert response.status_code == 200, response.text
    (call,) = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "book"
    assert json.loads(call["function"]["arguments"]) == {"address": {"city": "Oslo"}}
