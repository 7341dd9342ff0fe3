"""A small MCP server for the tests of ``lokal.mcp`` (run as a script; not collected).

``python fixture_server.py [--name NAME] [--collide TOOL] [--recursive] [--http PORT]``: stdio
by default, streamable HTTP on 127.0.0.1:PORT with ``--http``. Its tools cover each behaviour
the client must handle: a normal tool, structured output, ``$ref`` in an input schema, a
hyphenated and a dotted name, a tool that raises, one that hangs, one that reports the
server's environment and pid, one that kills the server, and (``--collide``) an extra tool
named to collide with a second server's.
"""

from __future__ import annotations

import argparse
import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field


class Address(BaseModel):
    city: str = Field(description="the city")
    street: str = ""


class Booking(BaseModel):
    guest: str
    address: Address
    nights: int = Field(ge=1)


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


def environment() -> dict[str, str]:
    """The environment the process was started with (``/proc``: Python's own additions, such
    as PEP 538's LC_CTYPE, do not show)."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            raw = handle.read().split(b"\0")
    except OSError:
        return dict(os.environ)
    pairs = (item.decode(errors="replace").partition("=") for item in raw if item)
    return {key: value for key, _, value in pairs}


def build(name: str, collide: str | None, recursive: bool) -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool(description="Echo the text back, unchanged.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two integers (structured output).")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Book a room for a guest at an address.")
    def book(booking: Booking) -> str:
        return f"booked {booking.nights} night(s) for {booking.guest} in {booking.address.city}"

    @server.tool(name="get-weather", description="The weather in a city.")
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    @server.tool(name="text.shout", description="Upper-case a text.")
    def shout(text: str) -> str:
        return text.upper()

    @server.tool(description="Always fails: an error result with the message.")
    def explode(message: str = "boom") -> str:
        raise ToolError(message)

    @server.tool(description="Sleep for a long time.")
    async def hang(seconds: float = 3600) -> str:
        await anyio.sleep(seconds)
        return "woke up"

    @server.tool(description="The server's environment and process id.")
    def whoami() -> dict:
        return {"pid": os.getpid(), "name": name, "env": environment()}

    @server.tool(description="Kill the server process at once.")
    def die(code: int = 3) -> str:
        os._exit(code)

    if collide:

        @server.tool(name=collide, description=f"An extra tool named {collide}.")
        def extra() -> str:
            return f"{collide} from {name}"

    if recursive:

        @server.tool(description="Count the nodes of a tree (a recursive schema).")
        def count_nodes(tree: Tree) -> int:
            return 1 + sum(count_nodes(child) for child in tree.children)

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="fixture")
    parser.add_argument("--collide", default=None)
    parser.add_argument("--recursive", action="store_true")
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on port")
    args = parser.parse_args()
    server = build(args.name, args.collide, args.recursive)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
