"""Which idempotency ids a model *may* have seen: a small in-memory filter in front of the store.

The store is the record of a model's ids and their answers (written atomically with the log
append). Asking it about every id would cost a round trip per learn, so each loaded model keeps a
:class:`SeenIds`: Bloom filters that answer "certainly new" for almost every new id (no store
call) and "maybe seen" for every id in the window (then the store is asked, and its answer is
the truth). A filter never forgets an id it was given (no false "new"); a false "maybe" costs
one store lookup that finds nothing.

The filter is a list of *segments*, each a Bloom filter of the ids of consecutive log entries:
the first holds 256 ids, each next one twice as many, up to 65,536. A segment whose newest entry
is older than the idempotency window is dropped as a whole (at the next snapshot, when the store
forgets those ids too). So the memory is about 1.5 bytes per id of the window plus at most two
largest segments of slack (the one filling up, the oldest one partly behind the window): at most
~350 KB per model at the default window of 100,000 (295 KB at steady state), ~1 KB for a model
with a few hundred ids; the false "maybe" rate is ~0.4% per full segment (k = 6 probes, 12 bits
per id), 0.7% at the default window.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

_BITS_PER_ID = 12
_PROBES = 6  # ~ln 2 x bits per id: the false-positive optimum, (1 - e^(-6/12))^6 = 0.37%
_FIRST = 256
_LARGEST = 65_536
_MASK64 = (1 << 64) - 1
_MASK32 = (1 << 32) - 1


def _hash(key: str) -> tuple[int, int]:
    """Two 32-bit hashes of ``key`` (Python's per-process string hash: the filter is never
    stored), for the probes ``h1 + i * h2`` (double hashing)."""
    h = hash(key) & _MASK64
    return h & _MASK32, (h >> 32) | 1


class _Segment:
    """One Bloom filter of at most ``capacity`` ids, with the newest log seq among them."""

    __slots__ = ("bits", "capacity", "count", "nbits", "newest")

    def __init__(self, capacity: int) -> None:
        self.bits = bytearray(capacity * _BITS_PER_ID // 8 + 1)
        self.nbits = 8 * len(self.bits)
        self.capacity = capacity
        self.count = 0
        self.newest = 0

    def add(self, h1: int, h2: int) -> None:
        bits, nbits = self.bits, self.nbits
        for i in range(_PROBES):
            pos = (h1 + i * h2) % nbits
            bits[pos >> 3] |= 1 << (pos & 7)
        self.count += 1

    def add_many(self, keys: list[str]) -> None:
        """:meth:`add` of every key, vectorised (a model's stored ids at load: 100,000 in
        ~0.05 s instead of ~0.3 s); the same bits as one :meth:`add` each."""
        h = np.fromiter((hash(k) & _MASK64 for k in keys), dtype=np.uint64, count=len(keys))
        h1, h2 = h & np.uint64(_MASK32), (h >> np.uint64(32)) | np.uint64(1)
        bits = np.frombuffer(self.bits, dtype=np.uint8)  # a view: writes go to self.bits
        for i in range(_PROBES):  # h1 + i * h2 < 2**35: no overflow
            pos = (h1 + np.uint64(i) * h2) % np.uint64(self.nbits)
            np.bitwise_or.at(bits, (pos >> np.uint64(3)).astype(np.intp),
                             np.left_shift(1, pos & np.uint64(7)).astype(np.uint8))  # fmt: skip
        self.count += len(keys)

    def has_many(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """:meth:`has` of every ``(h1, h2)`` pair (uint64 arrays), vectorised."""
        bits = np.frombuffer(self.bits, dtype=np.uint8)
        found = np.ones(len(h1), dtype=bool)
        for i in range(_PROBES):
            pos = (h1 + np.uint64(i) * h2) % np.uint64(self.nbits)
            found &= ((bits[(pos >> np.uint64(3)).astype(np.intp)] >> (pos & np.uint64(7)))
                      & 1).astype(bool)  # fmt: skip
        return found

    def has(self, h1: int, h2: int) -> bool:
        bits, nbits = self.bits, self.nbits
        for i in range(_PROBES):
            pos = (h1 + i * h2) % nbits
            if not bits[pos >> 3] >> (pos & 7) & 1:
                return False
        return True


class SeenIds:
    """The ids a model may have seen in its idempotency window (a superset of them).

    Examples
    --------
    >>> s = SeenIds()
    >>> _ = s.add("row-1", seq=1)
    >>> "row-1" in s, s.nbytes
    (True, 385)
    >>> s.forget_upto(1)  # the window moved past seq 1
    >>> "row-1" in s
    False
    """

    __slots__ = ("_next", "_segs")

    def __init__(self) -> None:
        self._segs: list[_Segment] = []  # oldest first
        self._next = _FIRST  # capacity of the next segment a learn starts

    def __contains__(self, key: str) -> bool:
        """Whether ``key`` may have been seen (``False``: certainly not, within the window)."""
        if not self._segs:
            return False
        h1, h2 = _hash(key)
        return any(seg.has(h1, h2) for seg in reversed(self._segs))

    def maybe_many(self, keys: list[str]) -> list[bool]:
        """``key in self`` of every key (a batch's ids: one vectorised pass per segment instead
        of a Python loop of probes per id; the same answers)."""
        if not self._segs or not keys:
            return [False] * len(keys)
        h = np.fromiter((hash(k) & _MASK64 for k in keys), dtype=np.uint64, count=len(keys))
        h1, h2 = h & np.uint64(_MASK32), (h >> np.uint64(32)) | np.uint64(1)
        found = np.zeros(len(keys), dtype=bool)
        for seg in self._segs:
            found |= seg.has_many(h1, h2)
        return found.tolist()

    def __len__(self) -> int:
        """Ids added and not forgotten (repeats counted again)."""
        return sum(seg.count for seg in self._segs)

    @property
    def nbytes(self) -> int:
        """Bytes of the filters' bit arrays (the estimate :mod:`app.registry.loaded` counts)."""
        return sum(len(seg.bits) for seg in self._segs)

    def add(self, key: str, seq: int) -> int:
        """Remember ``key``, learned as log entry ``seq``; returns the bytes newly allocated (a
        new segment) for the memory budget."""
        grown = 0
        seg = self._segs[-1] if self._segs else None
        if seg is None or seg.count >= seg.capacity:
            seg = _Segment(self._next)
            self._next = min(_LARGEST, 2 * self._next)
            self._segs.append(seg)
            grown = len(seg.bits)
        seg.add(*_hash(key))
        seg.newest = max(seg.newest, seq)
        return grown

    def add_many(self, keys: list[str], seqs: list[int]) -> int:
        """:meth:`add` of each ``(key, seq)`` in order (a batch's ids, vectorised: the same
        segments and bits); returns the bytes newly allocated."""
        if len(keys) < 16:
            return sum(self.add(k, q) for k, q in zip(keys, seqs, strict=True))
        grown = i = 0
        while i < len(keys):
            seg = self._segs[-1] if self._segs else None
            if seg is None or seg.count >= seg.capacity:
                seg = _Segment(self._next)
                self._next = min(_LARGEST, 2 * self._next)
                self._segs.append(seg)
                grown += len(seg.bits)
            take = min(len(keys) - i, seg.capacity - seg.count)
            seg.add_many(keys[i : i + take])
            seg.newest = max(seg.newest, *seqs[i : i + take])
            i += take
        return grown

    def add_all(self, keys: Iterable[str], seq: int) -> None:
        """Remember ids read from the store, all as of log entry ``seq`` (at least as new as any
        of them): one segment sized for them (ids learned next start a segment of their own)."""
        keys = list(keys)
        if not keys:
            return
        seg = _Segment(max(_FIRST, len(keys)))
        seg.add_many(keys)
        seg.newest = seq
        seg.capacity = seg.count  # full
        self._segs.append(seg)

    def forget_upto(self, seq: int) -> None:
        """Drop the segments whose ids were all learned at or before log entry ``seq`` (the
        store forgets those ids at the same time)."""
        self._segs = [seg for seg in self._segs if seg.newest > seq]
