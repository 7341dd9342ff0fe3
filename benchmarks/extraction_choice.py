"""What should choose the extracted answer among a file's passages: the embedding or the model.

    LOKAL_N_THREADS=2 .venv/bin/python benchmarks/extraction_choice.py [--limit N]

For each development question of ``data/dev/extraction_questions.json`` (a question about a
file of ``data/workspace``, and a text the right passage holds) the passages of the file
that can answer (``lokal.llm.evidence.answerable``) are ranked by all-MiniLM-L6-v2, and the
chosen one is checked: the closest (``k=1``), or the one the bundled model finds likeliest
as the reply among the closest 2, 3 and 4 (``by="likelihood"``). Prints one line per
question and the count per way of choosing, with a Wilson 95 % interval. About a minute on
two cores. ``lokal.llm.extract.CHOOSE_BY`` is set from this (docs/decisions.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from lokal.bench.stats import wilson_interval  # noqa: E402
from lokal.config import load_profile  # noqa: E402
from lokal.llm.backends import get_backend  # noqa: E402
from lokal.llm.evidence import Passage, answerable, text_passages  # noqa: E402
from lokal.llm.extract import choose_passage  # noqa: E402

WAYS = (("closest", 1), ("likeliest of 2", 2), ("likeliest of 3", 3), ("likeliest of 4", 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument("--model_config", default=str(REPO / "configs" / "model.yaml"))
    args = parser.parse_args()
    questions = json.loads((REPO / "data" / "dev" / "extraction_questions.json").read_text())
    questions = questions[: args.limit]
    profile = load_profile(args.model_config)
    backend = get_backend(profile)
    workspace = REPO / "data" / "workspace"
    right = {name: 0 for name, _ in WAYS}
    for item in questions:
        text = (workspace / item["file"]).read_text("utf-8")
        passages = [Passage(t, "file_reader", item["file"]) for t in text_passages(text)]
        passages = answerable(item["question"], passages)
        marks = []
        for name, k in WAYS:
            chosen = choose_passage(
                item["question"],
                passages,
                backend=backend,
                settings=profile.generation,
                k=k,
                by="embedding" if k == 1 else "likelihood",
            )
            ok = item["answer_has"].casefold() in chosen.passage.text.casefold()
            right[name] += ok
            marks.append("+" if ok else "-")
        print(f"{' '.join(marks)}  {item['question']}", flush=True)
    n = len(questions)
    print(f"questions: {n}")
    for name, _ in WAYS:
        low, high = wilson_interval(right[name], n)
        print(f"{name}: {right[name]}/{n} hold the answer (95 % {low:.0%}-{high:.0%})")


if __name__ == "__main__":
    main()
