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
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--seconds", type=float, default=60, help="stop sending after this")
    parser.add_argument("--max-queue", type=int, default=4)
    parser.add_argument("--gen-ms", type=float, default=20, help="scripted generation time")
    parser.add_argument("--sequential", type=int, default=20, help="requests for the overhead")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    args.clients = max(1, min(args.clients, 64))
    args.requests = max(1, min(args.requests, 1000))

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


if __name__ == "__main__":
    sys.exit(main())
