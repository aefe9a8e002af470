"""Bytes codec for model state: versioned JSON header + raw numpy arrays + checksum.

Layout (all integers little-endian)::

    b"CHORUSSN"              8-byte magic
    u16 version              format version (1)
    u8  digest kind          0 = SHA-256, 1 = HMAC-SHA-256
    u32 header length        n
    n bytes                  JSON header: {"meta": ..., "state": <engine header>,
                                           "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}]}
    ...                      raw C-order array bytes, concatenated at the recorded offsets
    32 bytes                 digest of everything before it

Nothing here uses pickle. Object arrays are refused on encode and on decode; the digest is checked
before the header is even parsed, so a corrupted or forged snapshot is never handed to the engine.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from typing import Any

import numpy as np

from app.errors import CorruptSnapshot

MAGIC = b"CHORUSSN"
VERSION = 1
_PREFIX = struct.Struct("<8sHBI")
_DIGEST_LEN = 32
_ALLOWED_KINDS = set("biufc")  # bool, int, uint, float, complex: no objects, no strings


def _digest(payload: bytes, key: bytes | None) -> bytes:
    if key:
        return hmac.new(key, payload, hashlib.sha256).digest()
    return hashlib.sha256(payload).digest()


def encode(
    state: dict[str, Any], meta: dict[str, Any] | None = None, key: bytes | None = None
) -> bytes:
    """Serialise an engine state (``{"header", "arrays"}``) plus app metadata to bytes.

    Parameters
    ----------
    state
        What ``model.to_state()`` returned.
    meta
        JSON-serialisable app metadata stored alongside (log offset, metrics, ...).
    key
        HMAC key; ``None`` for a plain SHA-256 checksum.

    Returns
    -------
    bytes
        The snapshot.

    Examples
    --------
    >>> import numpy as np
    >>> blob = encode({"header": {"v": 1}, "arrays": {"a": np.arange(3)}}, {"seq": 3})
    >>> state, meta = decode(blob)
    >>> state["arrays"]["a"].tolist(), meta
    ([0, 1, 2], {'seq': 3})
    """
    manifest, chunks, offset = [], [], 0
    for name, arr in state.get("arrays", {}).items():
        a = np.ascontiguousarray(arr)
        if a.dtype.kind not in _ALLOWED_KINDS:
            raise ValueError(f"array {name!r} has dtype {a.dtype}; only numeric arrays are stored")
        raw = a.tobytes(order="C")
        manifest.append(
            {
                "name": name,
                "dtype": a.dtype.str,
                "shape": list(a.shape),
                "offset": offset,
                "nbytes": len(raw),
            }
        )
        chunks.append(raw)
        offset += len(raw)
    header = json.dumps(
        {"meta": meta or {}, "state": state.get("header", {}), "arrays": manifest},
        separators=(",", ":"),
        allow_nan=True,
    ).encode()
    kind = 1 if key else 0
    payload = b"".join([_PREFIX.pack(MAGIC, VERSION, kind, len(header)), header, *chunks])
    return payload + _digest(payload, key)


def decode(blob: bytes, key: bytes | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Verify and parse a snapshot made by :func:`encode`.

    Parameters
    ----------
    blob
        Snapshot bytes.
    key
        The HMAC key the snapshot was written with (``None`` for SHA-256 snapshots).

    Returns
    -------
    tuple
        ``(state, meta)`` with ``state = {"header": dict, "arrays": dict[str, ndarray]}``.

    Raises
    ------
    CorruptSnapshot
        Wrong magic/version, checksum mismatch, wrong digest kind or malformed layout.
    """
    blob = bytes(blob)
    if len(blob) < _PREFIX.size + _DIGEST_LEN:
        raise CorruptSnapshot("snapshot too short")
    magic, version, kind, hlen = _PREFIX.unpack_from(blob, 0)
    if magic != MAGIC:
        raise CorruptSnapshot("not a chorus snapshot (bad magic)")
    if version != VERSION:
        raise CorruptSnapshot(f"unsupported snapshot version {version}")
    if kind not in (0, 1):
        raise CorruptSnapshot(f"unknown digest kind {kind}")
    if kind == 1 and not key:
        raise CorruptSnapshot("snapshot is HMAC-signed but no CHORUS_SNAPSHOT_KEY is configured")
    if kind == 0 and key:
        raise CorruptSnapshot("snapshot is not HMAC-signed but CHORUS_SNAPSHOT_KEY is set")
    payload, digest = blob[:-_DIGEST_LEN], blob[-_DIGEST_LEN:]
    if not hmac.compare_digest(_digest(payload, key if kind == 1 else None), digest):
        raise CorruptSnapshot("snapshot checksum mismatch")
    start = _PREFIX.size
    try:
        header = json.loads(payload[start : start + hlen])
        body = memoryview(payload)[start + hlen :]
        arrays = {}
        for entry in header["arrays"]:
            dtype = np.dtype(entry["dtype"])
            if dtype.kind not in _ALLOWED_KINDS:
                raise CorruptSnapshot(f"array {entry['name']!r} has a non-numeric dtype")
            lo, n = int(entry["offset"]), int(entry["nbytes"])
            if lo < 0 or lo + n > len(body):
                raise CorruptSnapshot(f"array {entry['name']!r} lies outside the snapshot")
            arr = np.frombuffer(body[lo : lo + n], dtype=dtype).reshape(entry["shape"]).copy()
            arrays[entry["name"]] = arr
    except CorruptSnapshot:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptSnapshot(f"malformed snapshot: {exc}") from exc
    return {"header": header["state"], "arrays": arrays}, header["meta"]
