"""Model choice for the calendar assistant: which per-field model learns a person's habits fastest.

Replays the browser test's scripted person (``examples/calendar_assistant/scripted.py``) through the
assistant's backend against a live Chorus (started here on the embedded store in a temporary
directory, like ``python -m examples.calendar_assistant`` does): for each meeting, suggest, then
save the person's preferred values as the labels of those suggestions. For each model setting and
seed of the meeting stream it records which of the four suggestions were kept, and prints the mean
share kept over meetings 1-10, 21-30 and 31-40 (one 40-meeting run per seed; the first 30 meetings
of a stream are the 30-meeting stream).

Run: ``nice -n 10 python benchmarks/calendar_models.py`` (about 3 minutes on 2 shared cores;
``--seeds 1-3`` for a quick look). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples.calendar_assistant.__main__ import start_chorus, wait_ready  # noqa: E402
from examples.calendar_assistant.meetings import DAYS, TARGETS  # noqa: E402
from examples.calendar_assistant.scripted import preferences, scripted_meetings  # noqa: E402
from examples.calendar_assistant.server import AssistantSettings, create_app  # noqa: E402

SETTINGS: list[dict[str, Any]] = [
    {"learner": "hoeffding_tree", "grace_period": 10, "delta": 0.01},
    {"learner": "hoeffding_tree", "grace_period": 10, "delta": 0.05},
    {"learner": "hoeffding_tree", "grace_period": 5, "delta": 0.05},
    {"learner": "hoeffding_tree", "grace_period": 5, "delta": 0.1},
    {"learner": "naive_bayes"},
]
WINDOWS = ((1, 10), (21, 30), (31, 40))
MONDAY = dt.date(2026, 11, 23)


def kept_per_meeting(
    chorus_url: str, data_dir: Path, prefix: str, seed: int, **model
) -> list[float]:
    """Share of the four suggestions the scripted person kept, meeting by meeting."""
    from fastapi.testclient import TestClient

    settings = AssistantSettings(
        chorus_url=chorus_url, data_dir=data_dir, model_prefix=prefix, **model
    )
    kept = []
    with TestClient(create_app(settings)) as client:
        for meeting in scripted_meetings(WINDOWS[-1][1], seed):
            answer = client.post("/api/users/me/suggest", json={"details": meeting})
            suggestions = answer.json()["suggestions"]
            wanted = preferences(meeting)
            kept.append(sum(suggestions[t]["value"] == wanted[t] for t in TARGETS) / len(TARGETS))
            date = MONDAY + dt.timedelta(days=DAYS.index(wanted["day_of_week"]))
            choice = {**wanted, "date": date.isoformat()}
            body = {"details": meeting, "choice": choice, "suggestions": suggestions}
            saved = client.post("/api/users/me/meetings", json=body)
            saved.raise_for_status()
    return kept


def seeds_arg(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seeds_arg, default=seeds_arg("1-12"), help="e.g. 1-12")
    args = parser.parse_args(argv)
    with socket.socket() as probe:  # a free port for Chorus
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        chorus = start_chorus(port, Path(tmp) / "chorus")
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, chorus)
            heads = " | ".join(f"meetings {a}-{b}" for a, b in WINDOWS)
            rows = [f"| per-field models (bagging of 5) | {heads} |", "|---" * 4 + "|"]
            for k, model in enumerate(SETTINGS):
                runs = [
                    kept_per_meeting(url, Path(tmp) / f"a{k}-{seed}", f"m{k}s{seed}", seed, **model)
                    for seed in args.seeds
                ]
                means = [
                    sum(sum(run[a - 1 : b]) / (b - a + 1) for run in runs) / len(runs)
                    for a, b in WINDOWS
                ]
                name = ", ".join(f"{key}={value}" for key, value in model.items())
                rows.append(f"| {name} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
                print(rows[-1], file=sys.stderr, flush=True)  # progress
        finally:
            chorus.terminate()
            chorus.wait(timeout=30)
    print(
        f"Scripted person, seeds {args.seeds[0]}-{args.seeds[-1]}: mean share of suggestions kept\n"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
