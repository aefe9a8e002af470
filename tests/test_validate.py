"""``app.validate``: the range checks on client values, tested on their own.

The HTTP tests reach these functions only behind the JSON parser and the request schemas, which
refuse most of what they look for first (lone-surrogate escapes, nested feature values), so
mutants of this module survived them. Here: a valid JSON-like value has no problem, and one
unrepresentable value put anywhere in it is found and named by its path.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.validate import INT64_MAX, INT64_MIN, check, check_label, problem

LONE = "\ud800"  # a lone surrogate: not UTF-8, which the JSON stores cannot keep

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(INT64_MIN, INT64_MAX),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
)
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)),
    max_leaves=20,
)
poisons = st.one_of(
    st.integers(INT64_MAX + 1, 2**300),
    st.integers(-(2**300), INT64_MIN - 1),
    st.builds(lambda a, b: a + LONE + b, st.text(max_size=3), st.text(max_size=3)),
)


@given(values)
def test_a_representable_value_has_no_problem(value) -> None:
    assert problem(value, "features") is None
    check(value, "features")  # (no exception)


@given(values, poisons, st.data())
def test_one_unrepresentable_value_anywhere_is_found_by_its_path(value, poison, data) -> None:
    """The poison replaces a random scalar of the value (or becomes a value of its own); the
    problem names exactly the path to it."""
    path: list = []
    node = value
    while isinstance(node, dict | list) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else
                                        range(len(node))))  # fmt: skip
        path.append(key)
        node = node[key]
    if path:
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = poison
        # an earlier sibling could not be a problem (the value was clean): the path is exact
    else:
        value = poison
    field = ".".join(["features", *map(str, path)])
    found = problem(value, "features")
    assert found is not None and found.startswith(field + ": "), (found, field)
    with pytest.raises(InvalidInput, match="^" + re.escape(field) + ": "):
        check(value, "features")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2**63, "features: integer 9223372036854775808 is outside the 64-bit range"),
        (-(2**63) - 1, "features: integer -9223372036854775809 is outside the 64-bit range"),
        (2**63 - 1, None),
        (-(2**63), None),
        (2**400, "features: integer of 401 bits is outside the 64-bit range"),
        ({"a": LONE}, "features.a: invalid unicode (lone surrogate)"),
        ({LONE: 1}, "features: a key has invalid unicode (lone surrogate)"),
        ([[1, (2, 2**64)]], "features.0.1.1: integer 18446744073709551616"),
        (True, None),
        (float("nan"), None),
    ],
)
def test_named_cases(value, expected) -> None:
    found = problem(value, "features")
    assert found == expected if expected is None else found.startswith(expected), found


@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: {"k": v}], ids=["list", "dict"])
def test_nesting_deeper_than_32_levels_is_refused(wrap) -> None:
    def nested(depth: int) -> object:
        v: object = []
        for _ in range(depth):
            v = wrap(v)
        return v

    key = "0" if isinstance(wrap([]), list) else "k"
    assert problem(nested(32), "features") is None  # containers at depths 0..32
    found = problem(nested(33), "features")
    assert found is not None and found.endswith("nested deeper than 32 levels"), found
    assert found.startswith("features." + ".".join([key] * 33) + ":"), found


@pytest.mark.parametrize(
    ("label", "bad"),
    [(2**63, True), (-(2**63) - 1, True), (2**63 - 1, False), ("a" + LONE, True), ("é", False),
     (1.5, False), (None, False), (True, False)],
)  # fmt: skip
def test_check_label(label, bad) -> None:
    if bad:
        with pytest.raises(InvalidInput, match="^label: "):
            check_label(label)
        with pytest.raises(InvalidInput, match="^y: "):
            check_label(label, "y")
    else:
        check_label(label)
