"""Snapshot codec: round trip, checksum and HMAC verification, no objects, engine state."""

from __future__ import annotations

import numpy as np
import pytest

from app import snapshot
from app.errors import CorruptSnapshot


def _state():
    return {
        "header": {
            "format": "chorus-state",
            "version": 1,
            "spec": {"seed": 3},
            "names": ["a", "b"],
        },
        "arrays": {
            "f64": np.linspace(0, 1, 7),
            "i32": np.arange(12, dtype=np.int32).reshape(3, 4),
            "u8": np.frombuffer(b"\x00\x01\xff", dtype=np.uint8),
            "empty": np.zeros((0, 5)),
            "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
            "bool": np.array([True, False]),
        },
    }


@pytest.mark.parametrize("key", [None, b"secret"])
def test_round_trip(key):
    state = _state()
    blob = snapshot.encode(state, {"seq": 42, "metrics": {"cells": [["a", "b", 3]]}}, key)
    got, meta = snapshot.decode(blob, key)
    assert meta == {"seq": 42, "metrics": {"cells": [["a", "b", 3]]}}
    assert got["header"] == state["header"]
    assert set(got["arrays"]) == set(state["arrays"])
    for name, arr in state["arrays"].items():
        assert got["arrays"][name].dtype == arr.dtype
        np.testing.assert_array_equal(got["arrays"][name], arr)
        assert got["arrays"][name].flags.writeable


@pytest.mark.parametrize("key", [None, b"secret"])
def test_any_flipped_byte_is_rejected(key):
    blob = snapshot.encode(_state(), {"seq": 1}, key)
    for pos in (0, 9, 20, len(blob) // 2, len(blob) - 40, len(blob) - 1):
        bad = bytearray(blob)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptSnapshot):
            snapshot.decode(bytes(bad), key)


def test_truncated_is_rejected():
    blob = snapshot.encode(_state())
    for n in (0, 10, len(blob) - 1):
        with pytest.raises(CorruptSnapshot):
            snapshot.decode(blob[:n])


def test_hmac_key_must_match():
    blob = snapshot.encode(_state(), key=b"k1")
    with pytest.raises(CorruptSnapshot, match="checksum"):
        snapshot.decode(blob, b"k2")
    with pytest.raises(CorruptSnapshot, match="no CHORUS_SNAPSHOT_KEY"):
        snapshot.decode(blob, None)
    plain = snapshot.encode(_state())
    with pytest.raises(CorruptSnapshot, match="not HMAC-signed"):
        snapshot.decode(plain, b"k1")


def test_forged_plain_checksum_cannot_pass_hmac():
    """Recomputing the SHA-256 of a tampered payload does not help without the key."""
    import hashlib

    blob = snapshot.encode(_state(), key=b"k")
    payload = bytearray(blob[:-32])
    payload[-1] ^= 0xFF
    forged = bytes(payload) + hashlib.sha256(payload).digest()
    with pytest.raises(CorruptSnapshot):
        snapshot.decode(forged, b"k")


def _forged(arrays: list[dict], body: bytes, magic: bytes = snapshot.MAGIC,
            version: int = snapshot.VERSION) -> bytes:  # fmt: skip
    """A snapshot anyone can write: any header and body, with a correct SHA-256 (no key)."""
    import hashlib
    import json

    header = json.dumps({"meta": {}, "state": {}, "arrays": arrays}).encode()
    payload = snapshot._PREFIX.pack(magic, version, 0, len(header)) + header + body
    return payload + hashlib.sha256(payload).digest()


_ARRAY = {"name": "a", "dtype": "<f8", "shape": [2], "offset": 0, "nbytes": 16}


@pytest.mark.parametrize(
    ("arrays", "magic", "version", "message"),
    [
        ([{**_ARRAY, "dtype": "|O"}], snapshot.MAGIC, 1, "non-numeric dtype"),
        ([{**_ARRAY, "dtype": "<U2"}], snapshot.MAGIC, 1, "non-numeric dtype"),
        ([{**_ARRAY, "dtype": "|V8"}], snapshot.MAGIC, 1, "non-numeric dtype"),
        ([{**_ARRAY, "offset": 8}], snapshot.MAGIC, 1, "lies outside"),
        ([{**_ARRAY, "offset": -16}], snapshot.MAGIC, 1, "lies outside"),
        ([{**_ARRAY, "nbytes": 10**9}], snapshot.MAGIC, 1, "lies outside"),
        ([_ARRAY], b"CHORUSSX", 1, "bad magic"),
        ([_ARRAY], snapshot.MAGIC, 2, "unsupported snapshot version 2"),
        ([{**_ARRAY, "shape": [3]}], snapshot.MAGIC, 1, "malformed"),
        ([{"name": "a"}], snapshot.MAGIC, 1, "malformed"),
    ],
)
def test_a_forged_snapshot_with_a_correct_checksum_is_refused(arrays, magic, version, message):
    """Without a key the checksum guards against corruption, not forgery: a hand-made
    snapshot passes it, and the layout checks after it are what refuse objects, strings,
    reads outside the body (a negative offset would read from its end) and other formats."""
    body = np.array([1.0, 2.0]).tobytes()
    assert snapshot.decode(_forged([_ARRAY], body))[0]["arrays"]["a"].tolist() == [1.0, 2.0]
    with pytest.raises(CorruptSnapshot, match=message):
        snapshot.decode(_forged(arrays, body, magic, version))


def test_object_arrays_are_refused():
    with pytest.raises(ValueError, match="numeric"):
        snapshot.encode({"header": {}, "arrays": {"o": np.array([{"a": 1}], dtype=object)}})
    with pytest.raises(ValueError, match="numeric"):
        snapshot.encode({"header": {}, "arrays": {"s": np.array(["x"])}})


def test_engine_state_round_trip_predicts_identically():
    ensembles = pytest.importorskip("ensembles")
    if not hasattr(ensembles, "build_model"):
        pytest.skip("engine not available yet")
    rng = np.random.default_rng(0)
    model = ensembles.build_model(
        {
            "ensemble": "bagging",
            "learner": "hoeffding_tree",
            "n_models": 3,
            "seed": 5,
            "params": {"grace_period": 20},
        }
    )
    X = [{"a": float(rng.normal()), "b": str(rng.integers(3))} for _ in range(300)]
    y = [("p" if x["a"] > 0 else "n") for x in X]
    model.learn_many(X[:200], y[:200])
    blob = snapshot.encode(model.to_state(), {"seq": 200})
    state, _ = snapshot.decode(blob)
    clone = ensembles.load_state(state)
    assert clone.predict_proba_many(X[200:]) == model.predict_proba_many(X[200:])
    clone.learn_many(X[200:], y[200:])
    model.learn_many(X[200:], y[200:])
    assert clone.predict_proba_many(X[:50]) == model.predict_proba_many(X[:50])
