"""Real servers on loopback for tests: started, waited for, stopped."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"server at {url} did not answer in {timeout}s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def run_server(args: list[str], health_url: str, log: Path, timeout: float = 120) -> Iterator[None]:
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for_http(health_url, process, log, timeout)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def llama_cpp_server(model_path: str, log: Path) -> Iterator[str]:
    """The llama.cpp server that llama-cpp-python[server] ships, serving ``model_path``."""
    port = free_port()
    # as lokal's llama.cpp backend loads a model: without AMX repacking on CPUs with AMX,
    # whose first decode crashes there (lokal.llm.backends.llamacpp._without_amx_repacking)
    start = (
        "import runpy, llama_cpp\n"
        "from lokal.llm.backends.llamacpp import _without_amx_repacking\n"
        "with _without_amx_repacking(llama_cpp):\n"
        "    runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
    )
    args = [
        sys.executable,
        "-c",
        start,
        "--model",
        model_path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--model_alias",
        "smollm2",
        "--n_threads",
        os.environ.get("LOKAL_N_THREADS") or "2",
    ]
    if os.environ.get("LOKAL_N_BATCH"):  # as the profiles (lokal.config): another sum order
        args += ["--n_batch", os.environ["LOKAL_N_BATCH"]]
    base = f"http://127.0.0.1:{port}/v1"
    with run_server(args, f"{base}/models", log):
        yield base


class AppServer:
    """An ASGI app on loopback: uvicorn in a daemon thread on a free port, ``base`` its URL;
    ``lifespan="on"`` runs the app's startup (as ``lokal serve`` does) before it serves."""

    def __init__(self, app: object, lifespan: str = "off") -> None:
        import threading

        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.app = app
        self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.daemon = True
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
