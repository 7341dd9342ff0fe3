"""Load on ``lokal serve``: N concurrent clients on loopback, bounded in count and time.

Measures, against a server started in this process (uvicorn in a thread, 127.0.0.1 only):

- overhead: one client, sequential requests; the server's p50 latency over the p50 of the
  same decision made by calling ``generate_ai_message`` directly (goal: at most 1.1x on the
  bundled model);
- load: ``--clients`` clients sending ``--requests`` each (stopping at ``--seconds``):
  throughput, p50/p95 latency, 429s (the queue is ``--max-queue`` long), and that every
  request sent got an answer (200 or 429): zero failed, zero lost.

The model is a scripted one by default (``--gen-ms`` of simulated generation per reply, a
call then an answer); ``--model`` uses the bundled SmolLM2 through llama.cpp (slow; 2 cores).

    python benchmarks/serve_load.py                    # scripted, prints the table
    python benchmarks/serve_load.py --write            # and updates docs/performance.md
    python benchmarks/serve_load.py --model --clients 4 --requests 3

``--mock`` measures throughput instead, against ``lokal serve --profile mock`` started as a
process of its own: ``--clients`` clients (50) send ``--requests`` requests each (20) at
once, retrying a 429 when its ``retry-after-ms`` / ``Retry-After`` says, as the OpenAI SDKs
do; completions, 429s and failures are counted. What the queue allows is measured in the
same run: as many decisions of the same requests, made directly in this process through as
many workers as the server has slots (one for a model in its process). The target is served
throughput at least 80 % of that.

    python benchmarks/serve_load.py --mock --write     # updates docs/performance.md

``--apis`` measures each API of the server against a direct call, in one run and taking
turns (so that the machine's noise falls on both): the p50 of a chat completion, a Responses
request and an Anthropic Messages request, each over the p50 of the same decision made with
``generate_ai_message`` (goal: at most 1.1x on the bundled model, ``--model``); and the
embeddings throughput through ``/v1/embeddings`` over calling the embedder directly (goal:
within 1.2x).

    python benchmarks/serve_load.py --apis --model --sequential 8 --write
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from lokal.config import load_profile  # noqa: E402
from lokal.llm.backends import Completion, get_backend  # noqa: E402
from lokal.llm.backends.scripted import ScriptedBackend  # noqa: E402
from lokal.llm.decide import generate_ai_message  # noqa: E402
from lokal.serve.app import create_app  # noqa: E402

CONFIG = ROOT / "configs" / "model.yaml"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- serve_load:begin -->", "<!-- serve_load:end -->"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


class Simulated(ScriptedBackend):
    """Replies for ever: a call, then an answer, each after ``seconds`` of "generation"."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.count = 0
        self.lock = threading.Lock()

    def generate(self, request: Any) -> Completion:
        with self.lock:  # one generation at a time, as an in-process model
            self.count += 1
            time.sleep(self.seconds)
            if self.count % 2:
                text = json.dumps(
                    {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}]}
                )
            else:
                text = "It is sunny in Paris."
        return Completion(text, 60, 12, "stop")


def start(app: Any) -> tuple[uvicorn.Server, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="store_true", help="the bundled model, not scripted")
    parser.add_argument(
        "--mock", action="store_true", help="throughput of `lokal serve --profile mock`"
    )
    parser.add_argument(
        "--questions",
        choices=["distinct", "same"],
        default="distinct",
        help="--mock: every request its own question (distinct), or one for all (same)",
    )
    parser.add_argument("--clients", type=int, default=None, help="8; --mock: 50")
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--seconds", type=float, default=60, help="stop sending after this")
    parser.add_argument("--max-queue", type=int, default=None, help="4; --mock: 8")
    parser.add_argument("--gen-ms", type=float, default=20, help="scripted generation time")
    parser.add_argument("--sequential", type=int, default=20, help="requests for the overhead")
    parser.add_argument(
        "--rounds", type=int, default=4, help="--mock: served and direct runs taking turns"
    )
    parser.add_argument(
        "--apis", action="store_true", help="each API's overhead, and embeddings throughput"
    )
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    args.clients = max(1, min(args.clients or (50 if args.mock else 8), 64))
    args.requests = max(1, min(args.requests, 1000))
    if args.max_queue is None:
        args.max_queue = 8 if args.mock else 4
    if args.mock:
        return mock_throughput(args)
    if args.apis:
        return apis_overhead(args)

    if args.model:
        profile = load_profile(CONFIG)
        backend = get_backend(profile)
        label = f"bundled model ({profile.name}, {profile.tool_calling.mode})"
    else:
        profile = load_profile(CONFIG, "smollm2-135m-free").with_tool_calling(preselect_k=None)
        backend = Simulated(args.gen_ms / 1000)
        label = f"scripted backend, {args.gen_ms:g} ms per generation"
    log: list[dict] = []
    app = create_app(profile, backend=backend, max_queue=args.max_queue, log=log.append)
    server, url = start(app)
    body = {"model": profile.name, "messages": MESSAGES, "tools": TOOLS}

    # overhead: sequential, one client, against the same decision made directly
    direct, served = [], []
    with httpx.Client(timeout=600) as client:
        client.post(url, json=body)  # warm up (imports, first load)
        generate_ai_message(profile, MESSAGES, TOOLS, backend=backend)
        for _ in range(args.sequential):
            started = time.perf_counter()
            generate_ai_message(profile, MESSAGES, TOOLS, backend=backend)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            response = client.post(url, json=body)
            served.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text

    # load: N clients at once
    results: list[tuple[int | str, float]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds
    sent = [0]

    def client_loop() -> None:
        with httpx.Client(timeout=600) as client:
            for _ in range(args.requests):
                if time.monotonic() > deadline:
                    return
                with lock:
                    sent[0] += 1
                started = time.perf_counter()
                try:
                    status: int | str = client.post(url, json=body).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    results.append((status, time.perf_counter() - started))
                if status == 429:
                    time.sleep(0.05)

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    server.should_exit = True

    ok = [t for s, t in results if s == 200]
    refused = sum(1 for s, _ in results if s == 429)
    failed = sum(1 for s, _ in results if s not in (200, 429))
    lost = sent[0] - len(results)
    ratio = statistics.median(served) / statistics.median(direct)
    row = {
        "setup": label,
        "direct_p50_ms": round(statistics.median(direct) * 1000, 1),
        "served_p50_ms": round(statistics.median(served) * 1000, 1),
        "overhead_ratio": round(ratio, 2),
        "clients": args.clients,
        "sent": sent[0],
        "ok": len(ok),
        "429": refused,
        "failed": failed,
        "lost": lost,
        "throughput_rps": round(len(ok) / wall, 1),
        "p50_ms": round(pct(ok, 0.5) * 1000, 1),
        "p95_ms": round(pct(ok, 0.95) * 1000, 1),
        "max_queue": args.max_queue,
    }
    print(json.dumps(row, indent=2))
    if args.write:
        write(row, args)
    return 0 if failed == 0 and lost == 0 else 1


def write(row: dict[str, Any], args: argparse.Namespace) -> None:
    command = "python benchmarks/serve_load.py" + (" --model" if args.model else "")
    command += f" --clients {args.clients} --requests {args.requests} --max-queue {args.max_queue}"
    section = f"""{BEGIN}
## `lokal serve` under load

`benchmarks/serve_load.py` starts `lokal serve` in-process on 127.0.0.1 and measures
(reproduce with `{command} --write`):

- **overhead**: one client, {args.sequential} sequential requests (a question with one tool),
  the server's p50 latency over the p50 of the same decision made by calling
  `generate_ai_message` directly: HTTP, JSON, validation of the request, the queue and the
  reply together;
- **load**: {args.clients} clients sending {args.requests} requests each at once, with a queue
  of {args.max_queue} in front of the one-at-a-time model: throughput, latency of the
  answered requests, 429s, and that every request sent got an answer.

| setup | direct p50 | served p50 | overhead | clients | sent | 200 | 429 | failed | lost | throughput | p50 | p95 |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| {row["setup"]} | {row["direct_p50_ms"]} ms | {row["served_p50_ms"]} ms | {row["overhead_ratio"]}x | {row["clients"]} | {row["sent"]} | {row["ok"]} | {row["429"]} | {row["failed"]} | {row["lost"]} | {row["throughput_rps"]} req/s | {row["p50_ms"]} ms | {row["p95_ms"]} ms |

The goal on the bundled model is an overhead of at most 1.1x: a decision there takes seconds,
so the server's few milliseconds vanish; on the scripted backend (a few ms per decision) the
ratio shows the server's fixed cost per request instead. Under overload the queue refuses
with 429 and `Retry-After` rather than letting latency grow without bound; no request fails
or is lost. `--model` runs the same on the bundled model (2 cores: use few clients and
requests).
{END}"""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Performance\n"
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text, encoding="utf-8")


# --- --mock: served throughput against what the queue allows ------------------------------

MOCK_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "file_reader",
            "description": "Read a text file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "max_chars": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "local_file_search",
            "description": "Search the files of the workspace for a word.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
]
THROUGHPUT_BEGIN, THROUGHPUT_END = (
    "<!-- serve_throughput:begin -->",
    "<!-- serve_throughput:end -->",
)


def _question(args: argparse.Namespace, client: int, number: int) -> str:
    if args.questions == "same":
        return "What does the Agent intro say?"
    return f"What does the Agent intro say about case {client * args.requests + number}?"


def _retry_after(headers: dict[str, str]) -> float:
    """How long a 429 says to wait, read as the OpenAI SDKs read it."""
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            return float(headers[name]) / divisor
        except (KeyError, ValueError):
            continue
    return 0.05


def _request(question: str) -> bytes:
    body = {"model": "mock", "messages": [{"role": "user", "content": question}]}
    data = json.dumps({**body, "tools": MOCK_TOOLS}).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def _client(port: int, requests: list[bytes], deadline: float, out: dict) -> None:
    """One keep-alive HTTP/1.1 connection (asyncio streams: the load generator's own cost
    stays small on 2 cores) sending ``requests`` in turn; a 429 is retried after its hint."""
    import asyncio

    reader = writer = None
    try:
        for request in requests:
            while time.monotonic() < deadline:
                fresh = writer is None
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                try:
                    writer.write(request)
                    await writer.drain()
                    status = int((await reader.readline()).split()[1])
                    headers = {}
                    while (line := await reader.readline()) not in (b"\r\n", b""):
                        name, _, value = line.decode("latin-1").partition(":")
                        headers[name.strip().lower()] = value.strip()
                    await reader.readexactly(int(headers.get("content-length", 0)))
                except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
                    writer.close()
                    reader = writer = None
                    if fresh:  # a kept-alive connection the server closed is sent again
                        out["failed"] += 1
                        out["errors"].append(type(exc).__name__)
                        break
                    continue
                if status == 429:
                    out["429"] += 1
                    await asyncio.sleep(_retry_after(headers))
                    continue
                if status == 200:
                    out["done"].append(time.perf_counter())
                else:
                    out["failed"] += 1
                    out["errors"].append(status)
                break
    finally:
        if writer is not None:
            writer.close()


class _MockServer:
    """``lokal serve --profile mock`` in a process of its own, up once its startup (the
    tool preselection's embedder) is done."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        import os
        import subprocess

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.output = folder / "serve.out"
        command = [
            sys.executable,
            "-c",
            "import sys; from lokal.cli import main; sys.exit(main(sys.argv[1:]))",
            *("serve", "--model_config", str(CONFIG), "--profile", "mock"),
            *("--port", str(self.port), "--max-queue", str(args.max_queue)),
            *("--log", str(folder / "requests.jsonl")),
        ]
        paths = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        began = time.monotonic()
        with open(self.output, "wb") as output:
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=env
            )
        while not self._answers("/health"):
            if self.process.poll() is not None or time.monotonic() - began > 120:
                self.stop()
                raise RuntimeError(self.output.read_text()[-2000:])
            time.sleep(0.2)
        self.startup_s = time.monotonic() - began

    def _answers(self, path: str, body: bytes | None = None) -> bool:
        import urllib.request

        url = f"http://127.0.0.1:{self.port}{path}"
        headers = {"Content-Type": "application/json"}
        try:
            urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=60).close()
            return True
        except OSError:
            return False

    def warm_up(self) -> None:
        """The first request's imports, as the direct run warms up."""
        body = {"model": "mock", "messages": MESSAGES, "tools": MOCK_TOOLS}
        assert self._answers("/v1/chat/completions", json.dumps(body).encode())

    def load(self, args: argparse.Namespace, questions: list[list[str]], out: dict) -> float:
        """Every client sends its questions at once; the seconds until all are answered."""
        import asyncio

        bodies = [[_request(q) for q in mine] for mine in questions]

        async def run() -> float:
            deadline = time.monotonic() + args.seconds
            began = time.perf_counter()
            await asyncio.gather(*(_client(self.port, b, deadline, out) for b in bodies))
            return time.perf_counter() - began

        return asyncio.run(run())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _direct(profile: Any, questions: list[str], slots: int, times: list[float]) -> float:
    """The decisions of ``questions`` made in this process through ``slots`` workers (what
    the server's queue allows, without HTTP); their seconds."""
    from concurrent.futures import ThreadPoolExecutor

    def decide(question: str) -> None:
        began = time.perf_counter()
        messages = [{"role": "user", "content": question}]
        decision = generate_ai_message(profile, messages, MOCK_TOOLS)
        assert decision.ok, decision.error
        times.append(time.perf_counter() - began)

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=slots) as pool:
        list(pool.map(decide, questions))
    return time.perf_counter() - began


def mock_throughput(args: argparse.Namespace) -> int:
    """Rounds of served load and of the same decisions made directly, taking turns, so that
    other work on the machine weighs on both alike."""
    import os
    import tempfile

    from lokal.llm.select import default_selector

    slots = 1  # a model in the server's process: one generation at a time (app.engine_for)
    profile = load_profile(CONFIG, "mock")
    default_selector().load()  # as the server does at start
    generate_ai_message(profile, MESSAGES, MOCK_TOOLS)  # as the server's warm-up request
    rounds = max(1, min(args.rounds, args.requests))
    out: dict[str, Any] = {"done": [], "429": 0, "failed": 0, "errors": []}
    served_s = direct_s = 0.0
    times: list[float] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        server = _MockServer(args, Path(folder))
        try:
            server.warm_up()
            for r in range(rounds):
                part = range(r * args.requests // rounds, (r + 1) * args.requests // rounds)
                questions = [[_question(args, c, n) for n in part] for c in range(args.clients)]
                done = len(out["done"])
                served_s += server.load(args, questions, out)
                flat = [q for mine in questions for q in mine][: len(out["done"]) - done]
                direct_s += _direct(profile, flat, slots, times)
        finally:
            server.stop()
    completions = len(out["done"])
    gaps = [b - a for a, b in zip(out["done"], out["done"][1:], strict=False)]
    served_rps, direct_rps = completions / served_s, completions / direct_s
    row = {
        "questions": args.questions,
        "clients": args.clients,
        "requests": args.requests,
        "max_queue": args.max_queue,
        "slots": slots,
        "rounds": rounds,
        "completions": completions,
        "429": out["429"],
        "failed": out["failed"],
        "errors": sorted(set(map(str, out["errors"]))),
        "served_s": round(served_s, 2),
        "served_rps": round(served_rps, 1),
        "gap_p50_ms": round(pct(gaps, 0.5) * 1000, 1),
        "direct_s": round(direct_s, 2),
        "direct_decision_p50_ms": round(statistics.median(times) * 1000, 1),
        "direct_rps": round(direct_rps, 1),
        "ratio": round(served_rps / direct_rps, 2),
        "server_startup_s": round(server.startup_s, 1),
        "loadavg_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }
    print(json.dumps(row, indent=2))
    if args.write:
        write_throughput(row, args)
    return 0 if out["failed"] == 0 and row["ratio"] >= 0.8 else 1


def write_throughput(row: dict[str, Any], args: argparse.Namespace) -> None:
    """The table in docs/performance.md: one row per (questions, max queue), each with the
    command that measured it; the text after the table is written by hand."""
    line = (
        f"| {row['questions']} | {row['clients']} × {row['requests']} | {row['max_queue']} | "
        f"{row['completions']} | {row['429']} | {row['failed']} | {row['served_rps']} req/s | "
        f"{row['gap_p50_ms']} ms | {row['direct_decision_p50_ms']} ms | "
        f"{row['direct_rps']} req/s | **{row['ratio']:.2f}** |"
    )
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Performance\n"
    rows: dict[tuple[str, int], str] = {}
    if THROUGHPUT_BEGIN in text:
        old = text.partition(THROUGHPUT_BEGIN)[2].partition(THROUGHPUT_END)[0]
        for kept in old.splitlines():
            cells = [c.strip() for c in kept.split("|")[1:-1]]
            if cells and cells[0] in ("distinct", "same"):
                rows[(cells[0], int(cells[2]))] = kept
    rows[(row["questions"], row["max_queue"])] = line
    ordered = sorted(rows, key=lambda key: (key[0] != "distinct", key[1]))
    commands = []
    for key in ordered:
        cells = [c.strip() for c in rows[key].split("|")[1:-1]]
        clients, _, requests = cells[1].partition(" × ")
        commands.append(
            f"    python benchmarks/serve_load.py --mock --clients {clients} --requests "
            f"{requests} --max-queue {key[1]} --questions {key[0]} --write"
        )
    section = f"""{THROUGHPUT_BEGIN}
{chr(10).join(commands)}

| questions | clients × requests | max queue | completions | 429s | failed | served | completions apart (p50) | direct decision (p50) | direct | served/direct |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(rows[key] for key in ordered)}
{THROUGHPUT_END}"""
    if THROUGHPUT_BEGIN in text and THROUGHPUT_END in text:
        head, _, rest = text.partition(THROUGHPUT_BEGIN)
        text = head + section + rest.partition(THROUGHPUT_END)[2]
    else:
        heading = "## Served throughput under load (mock backend)"
        text = text.rstrip("\n") + f"\n\n{heading}\n\n" + section + "\n"
    DOC.write_text(text, encoding="utf-8")


# --- --apis: every API against a direct call, and embeddings ---------------------------------

APIS_BEGIN, APIS_END = "<!-- serve_apis:begin -->", "<!-- serve_apis:end -->"


def _api_bodies(profile: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """The same question with the same tool, as each API asks it."""
    function = TOOLS[0]["function"]
    limit = profile.generation.max_new_tokens
    return {
        "chat completions": (
            "/chat/completions",
            {"model": profile.name, "messages": MESSAGES, "tools": TOOLS},
        ),
        "responses": (
            "/responses",
            {
                "model": profile.name,
                "input": MESSAGES,
                "tools": [{"type": "function", **function}],
                "store": False,
            },
        ),
        "anthropic messages": (
            "/messages",
            {
                "model": profile.name,
                "max_tokens": limit,
                "messages": MESSAGES,
                "tools": [
                    {
                        "name": function["name"],
                        "description": function["description"],
                        "input_schema": function["parameters"],
                    }
                ],
            },
        ),
    }


def apis_overhead(args: argparse.Namespace) -> int:
    from lokal.rag.embeddings import MINILM, LocalEmbedder

    if args.model:
        profile = load_profile(CONFIG)
        backend = get_backend(profile)
        label = f"bundled model ({profile.name}, {profile.tool_calling.mode})"
    else:
        profile = load_profile(CONFIG, "smollm2-135m-free").with_tool_calling(preselect_k=None)
        backend = Simulated(args.gen_ms / 1000)
        label = f"scripted backend, {args.gen_ms:g} ms per generation"
    app = create_app(profile, backend=backend, log=lambda entry: None, keep_traces=False)
    server, url = start(app)
    base = url.rsplit("/chat/completions", 1)[0]
    rows = []
    with httpx.Client(timeout=600) as client:
        for name, (path, body) in _api_bodies(profile).items():
            assert client.post(base + path, json=body).status_code == 200  # warm up
            generate_ai_message(profile, MESSAGES, TOOLS, backend=backend)
            direct, served = [], []
            for _ in range(args.sequential):
                started = time.perf_counter()
                generate_ai_message(profile, MESSAGES, TOOLS, backend=backend)
                direct.append(time.perf_counter() - started)
                started = time.perf_counter()
                response = client.post(base + path, json=body)
                served.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
            d, v = statistics.median(direct), statistics.median(served)
            rows.append((name, round(d * 1000, 1), round(v * 1000, 1), round(v / d, 2)))
            print(rows[-1], flush=True)
        # embeddings: a corpus in requests of 32 texts, through the server and directly
        texts = [
            f"Chunk {i}: notes on topic {i % 17}, with a few more words about item {i * 7}."
            for i in range(512)
        ]
        embedder = LocalEmbedder()
        embedder.embed(texts[:8])
        client.post(base + "/embeddings", json={"model": MINILM, "input": texts[:8]})
        direct_s = served_s = 0.0
        for _ in range(2):  # taking turns
            started = time.perf_counter()
            for i in range(0, len(texts), 32):
                embedder.embed(texts[i : i + 32])
            direct_s += time.perf_counter() - started
            started = time.perf_counter()
            for i in range(0, len(texts), 32):
                reply = client.post(
                    base + "/embeddings",
                    json={"model": MINILM, "input": texts[i : i + 32], "encoding_format": "base64"},
                )
                assert reply.status_code == 200, reply.text
            served_s += time.perf_counter() - started
    server.should_exit = True
    count = 2 * len(texts)
    embed_row = (
        embedder.backend,
        round(count / direct_s, 1),
        round(count / served_s, 1),
        round(served_s / direct_s, 2),
    )
    print(embed_row)
    if args.write:
        write_apis(label, rows, embed_row, args)
    return 0


def write_apis(label: str, rows: list[tuple], embed_row: tuple, args: argparse.Namespace) -> None:
    import platform

    command = "python benchmarks/serve_load.py --apis" + (" --model" if args.model else "")
    command += f" --sequential {args.sequential} --write"
    lines = "\n".join(
        f"| {name} | {direct} ms | {served} ms | {ratio}x |" for name, direct, served, ratio in rows
    )
    backend, direct_tps, served_tps, ratio = embed_row
    section = f"""{APIS_BEGIN}
## `lokal serve`: each API against a direct call

`{command}` on {platform.machine()}, {len(__import__("os").sched_getaffinity(0))} cores, {label}.
One client, {args.sequential} sequential requests per API, each taking turns with the same
decision made by calling `generate_ai_message` directly; p50 of each. The served reply is a
turn of the agent loop (`Agent.respond`) behind HTTP, the request's translation and checks,
the queue and the reply's writing.

| API | direct p50 | served p50 | overhead |
| --- | ---: | ---: | ---: |
{lines}

Embeddings: 512 short texts in requests of 32 (`encoding_format: base64`), twice, taking turns
with the embedder called directly in the same process ({backend} backend): {direct_tps} texts/s
direct, {served_tps} texts/s served, **{ratio}x** the direct time (goal: at most 1.2x).
{APIS_END}"""
    text = DOC.read_text(encoding="utf-8")
    if APIS_BEGIN in text and APIS_END in text:
        head, _, rest = text.partition(APIS_BEGIN)
        _, _, tail = rest.partition(APIS_END)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
