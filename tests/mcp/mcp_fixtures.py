"""Shared by the MCP tests: the fixture server's command line and process checks."""

from __future__ import annotations

import os
import time
from pathlib import Path

from helpers import MCP_FIXTURE_SERVER, mcp_stdio_server

FIXTURE_SERVER = MCP_FIXTURE_SERVER
stdio_server = mcp_stdio_server


def gone(pid: int, within: float = 10.0) -> bool:
    """True once process ``pid`` no longer exists (not even as a zombie)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
