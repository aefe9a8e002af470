"""The synthetic calendar generator (examples/calendar_assistant/synth.py) and its doctest."""

from __future__ import annotations

import doctest
import itertools
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # examples/ is not an installed package: import it from the checkout
    sys.path.insert(0, str(ROOT))

from examples.calendar_assistant import synth  # noqa: E402
from examples.calendar_assistant.synth import (  # noqa: E402
    DAYS,
    DURATIONS,
    FEATURES,
    TARGETS,
    example,
    generate,
    meetings,
)


@pytest.fixture(scope="module")
def rows():
    return generate(n=1790, seed=0)


def test_shape_and_types(rows):
    assert len(rows) == 1790
    assert len(FEATURES) == 32 == len(set(FEATURES))
    for r in rows:
        assert set(r) == set(FEATURES) | set(TARGETS)
        assert all(isinstance(v, str) and v for v in r.values())


def test_seeded_and_lazy_stream_agree(rows):
    assert generate(n=300, seed=0) == rows[:300]
    assert generate(n=300, seed=1) != rows[:300]
    assert list(itertools.islice(meetings(seed=0), 50)) == rows[:50]


def test_missing_values_present_in_attendee_fields(rows):
    missing = Counter(k for r in rows for k in FEATURES if r[k] == "?")
    assert 0.03 < missing["department"] / len(rows) < 0.4
    assert missing["prev_duration"] > 0
    assert all(r[t] != "?" for r in rows for t in TARGETS)


def test_targets(rows):
    days = Counter(r["day_of_week"] for r in rows)
    assert set(days) <= set(DAYS) and len(days) == 6  # never Sunday
    durations = Counter(r["duration"] for r in rows)
    assert set(durations) <= set(DURATIONS) and len(durations) >= 11
    top2 = sum(c for _, c in durations.most_common(2)) / len(rows)
    assert 0.5 < top2 < 0.8  # skewed: 30 and 60 minutes dominate
    assert len({r["start_time"] for r in rows}) >= 15
    assert len({r["location"] for r in rows}) >= 20  # open vocabulary


def test_open_vocabularies_grow_over_time(rows):
    first = {r["attendee"] for r in rows[:600]}
    late_new = {r["attendee"] for r in rows[1200:]} - first
    assert len(first) > 50 and len(late_new) > 10
    counts = Counter(r["attendee"] for r in rows).most_common()
    assert counts[0][1] > 10 * counts[len(counts) // 2][1]  # Zipf-like head and tail


def test_drift_points_change_the_stream_only_after_them():
    a = generate(n=400, seed=3, drift_at=[200])
    b = generate(n=400, seed=3, drift_at=[1000])
    assert a[:200] == b[:200]
    assert a[200:] != b[200:]


def test_noise_zero_is_more_predictable_than_default():
    clean = generate(n=600, seed=2, noise=0.0)
    noisy = generate(n=600, seed=2, noise=0.5)

    def consistency(rs):  # how often the same (attendee, event) pair repeats its duration
        seen, same = {}, 0
        for r in rs:
            key = (r["attendee"], r["event_type"])
            same += seen.get(key) == r["duration"]
            seen[key] = r["duration"]
        return same

    assert consistency(clean) > consistency(noisy)


def test_example_split(rows):
    x, y = example(rows[0], "day_of_week")
    assert y == rows[0]["day_of_week"]
    assert set(x) <= set(FEATURES) and "?" not in x.values()
    with pytest.raises(ValueError):
        example(rows[0], "colour")
    with pytest.raises(ValueError):
        generate(n=5, noise=2.0)


def test_module_doctest_runs():
    result = doctest.testmod(synth)
    assert result.attempted > 0 and result.failed == 0, result
