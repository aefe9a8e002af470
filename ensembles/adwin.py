"""ADWIN change detection (Bifet & Gavaldà 2007), compiled, its state in arrays.

ADWIN keeps a window of the most recent values of a stream (here: a member's 0/1 errors) and
drops its oldest part whenever two sub-windows, an older one ``W0`` and a newer one ``W1``, have
means that differ by more than

    eps_cut = sqrt(2 m v ln(2 ln(n) / delta)) + 2/3 m ln(2 ln(n) / delta),
    m = 1 / (n0 - min_len + 1) + 1 / (n1 - min_len + 1)

(``n`` the window's length, ``v`` its variance, ``n0``/``n1`` the sub-windows' lengths: the
variance form of the paper's bound, as MOA computes it). The window is stored as an exponential
histogram (ADWIN2): level ``i`` holds at most ``MAX_BUCKETS`` buckets of ``2**i`` values, each
bucket its sum and its variance; when a level overflows, its two oldest buckets merge into one of
the next level. So the window takes O(log n) memory and a check O(log n) time; as in MOA, the
cuts are checked every ``clock`` values once the window is longer than ``min_len``.

State of ``K`` detectors (one per ensemble member) as arrays, rows ``d = 0..K-1``:
``tot [K, LEVELS, MAX_BUCKETS + 1]`` and ``var [...]`` the buckets' sums and variances (oldest
first within a level; higher levels are older), ``cnt [K, LEVELS]`` buckets per level,
``fs [K, 2]`` (total, variance) and ``iv [K, 4]`` (width, levels in use, values seen, changes
detected). Everything is plain arithmetic on these arrays: the same values give the same
detections on any machine. The per-value kernels are inlined into their callers (numba's
``inline="always"``): a call copies the descriptors of the five arrays, which cost more than an
update's arithmetic (~60 vs ~20 ns an update, benchmarks/results/profile.md).

References
----------
Bifet, A. & Gavaldà, R. (2007). Learning from time-changing data with adaptive windowing. SDM.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from learners.jit import kernel, one_specialisation

MAX_BUCKETS = 5  # buckets per level before two merge (MOA's M)
LEVELS = 40  # 5 * (2**40 - 1) values before the oldest bucket falls off the top level
TOTAL, VARIANCE = 0, 1  # columns of fs
WIDTH, N_LEVELS, TICKS, N_CHANGES = 0, 1, 2, 3  # columns of iv


class AdwinState(NamedTuple):
    """The arrays of ``K`` ADWIN detectors (see the module docstring)."""

    tot: np.ndarray
    var: np.ndarray
    cnt: np.ndarray
    fs: np.ndarray
    iv: np.ndarray


def adwin_state(k: int) -> AdwinState:
    """``k`` empty detectors."""
    return AdwinState(
        tot=np.zeros((k, LEVELS, MAX_BUCKETS + 1)),
        var=np.zeros((k, LEVELS, MAX_BUCKETS + 1)),
        cnt=np.zeros((k, LEVELS), np.int64),
        fs=np.zeros((k, 2)),
        iv=np.zeros((k, 4), np.int64),
    )


def adwin_arrays(st: AdwinState, prefix: str) -> dict[str, np.ndarray]:
    """The state's arrays for ``to_state``, the bucket levels trimmed to those in use."""
    used = max(1, int(st.iv[:, N_LEVELS].max()) if len(st.iv) else 1)
    return {
        prefix + "tot": st.tot[:, :used].copy(),
        prefix + "var": st.var[:, :used].copy(),
        prefix + "cnt": st.cnt[:, :used].copy(),
        prefix + "fs": st.fs.copy(),
        prefix + "iv": st.iv.copy(),
    }


def load_adwin_arrays(st: AdwinState, arrays: dict[str, np.ndarray], prefix: str) -> None:
    """Load ``adwin_arrays`` output into ``st`` (same number of detectors), in place, once it is
    checked (``check_adwin``)."""
    loaded = adwin_state(st.cnt.shape[0])
    for name in AdwinState._fields:
        src = np.asarray(arrays[prefix + name])
        dst = getattr(loaded, name)
        if (src.dtype != dst.dtype or src.ndim != dst.ndim
                or any(s > d for s, d in zip(src.shape, dst.shape, strict=True))
                or src.shape[0] != dst.shape[0]):  # fmt: skip
            raise ValueError(f"state array {prefix + name} has shape {src.shape} / {src.dtype}")
        dst[tuple(slice(0, n) for n in src.shape)] = src
    check_adwin(loaded, prefix)
    for name in AdwinState._fields:
        getattr(st, name)[...] = getattr(loaded, name)


def check_adwin(st: AdwinState, prefix: str) -> None:
    """``ValueError`` naming the array unless every detector's window is one the kernels make:
    0..MAX_BUCKETS buckets per level, none above the levels in use (0..LEVELS) and some in the
    highest, a width that is the buckets' values, finite sums. (A forged bucket count made a
    check read and write outside the arrays.)"""
    cnt, iv = st.cnt, st.iv
    levels = iv[:, N_LEVELS]

    def refuse(name: str, what: str) -> None:
        raise ValueError(f"state array {prefix + name}: {what} (a forged or damaged state)")

    if ((cnt < 0) | (cnt > MAX_BUCKETS)).any():
        refuse("cnt", f"a level with buckets outside 0..{MAX_BUCKETS}")
    if ((levels < 0) | (levels > LEVELS)).any():
        refuse("iv", f"levels in use outside 0..{LEVELS}")
    above = np.arange(LEVELS) >= levels[:, None]
    top = np.take_along_axis(cnt, np.maximum(levels - 1, 0)[:, None], axis=1)[:, 0]
    if (cnt[above] != 0).any() or ((levels > 0) & (top == 0)).any():
        refuse("cnt", "buckets above the levels in use, or none in the highest")
    if (iv[:, WIDTH] != (cnt << np.arange(LEVELS)).sum(axis=1)).any():
        refuse("iv", "a width that is not the buckets' values")
    if (iv[:, TICKS] < 0).any() or (iv[:, N_CHANGES] < 0).any():
        refuse("iv", "a negative count")
    for name in ("tot", "var", "fs"):
        if not np.isfinite(getattr(st, name)).all():
            refuse(name, "a sum that is not finite")


@nb.njit(cache=True, inline="always")
def adwin_estimate(st, d):
    """Mean of detector d's window (0 when empty)."""
    w = st.iv[d, WIDTH]
    return st.fs[d, TOTAL] / w if w > 0 else 0.0


@nb.njit(cache=True)
def adwin_reset(st, d):
    """Detector d forgets everything but its count of changes."""
    st.tot[d] = 0.0
    st.var[d] = 0.0
    st.cnt[d] = 0
    st.fs[d] = 0.0
    changes = st.iv[d, N_CHANGES]
    st.iv[d] = 0
    st.iv[d, N_CHANGES] = changes


@nb.njit(cache=True)
def _drop_oldest(st, d):
    """Remove the oldest bucket from the window (the first of the highest level in use)."""
    lev = st.iv[d, N_LEVELS] - 1
    n1 = float(1 << lev)
    t = st.tot[d, lev, 0]
    v = st.var[d, lev, 0]
    n = st.iv[d, WIDTH] - (1 << lev)
    st.iv[d, WIDTH] = n
    st.fs[d, TOTAL] -= t
    if n > 0:
        u1 = t / n1
        mu = st.fs[d, TOTAL] / n
        st.fs[d, VARIANCE] -= v + n1 * n * (u1 - mu) * (u1 - mu) / (n1 + n)
    else:
        st.fs[d, TOTAL] = 0.0
        st.fs[d, VARIANCE] = 0.0
    c = st.cnt[d, lev]
    for b in range(c - 1):
        st.tot[d, lev, b] = st.tot[d, lev, b + 1]
        st.var[d, lev, b] = st.var[d, lev, b + 1]
    st.cnt[d, lev] = c - 1
    if c - 1 == 0:
        st.iv[d, N_LEVELS] = lev


@nb.njit(cache=True, inline="always")
def _compress(st, d):
    """Merge the two oldest buckets of every overflowing level into one of the next level."""
    for lev in range(LEVELS):
        c = st.cnt[d, lev]
        if c <= MAX_BUCKETS:
            return
        if lev + 1 == LEVELS:  # the top level is full: its oldest bucket leaves the window
            _drop_oldest(st, d)
            return
        n = float(1 << lev)
        u1 = st.tot[d, lev, 0] / n
        u2 = st.tot[d, lev, 1] / n
        t = st.tot[d, lev, 0] + st.tot[d, lev, 1]
        v = st.var[d, lev, 0] + st.var[d, lev, 1] + n * n * (u1 - u2) * (u1 - u2) / (2.0 * n)
        for b in range(c - 2):
            st.tot[d, lev, b] = st.tot[d, lev, b + 2]
            st.var[d, lev, b] = st.var[d, lev, b + 2]
        st.cnt[d, lev] = c - 2
        k = st.cnt[d, lev + 1]
        st.tot[d, lev + 1, k] = t
        st.var[d, lev + 1, k] = v
        st.cnt[d, lev + 1] = k + 1
        if st.iv[d, N_LEVELS] < lev + 2:
            st.iv[d, N_LEVELS] = lev + 2


@nb.njit(cache=True)
def sqrt_or_nan(x):
    """``math.sqrt``, NaN for x < 0 as compiled code (and MOA's Java) give, where Python raises:
    a variance a hair below 0 from rounding must not fail the interpreted twins."""
    return math.sqrt(x) if x >= 0.0 else math.nan


@nb.njit(cache=True)
def _cut(n0, n1, u0, u1, dd, v, min_len):
    """Whether sub-window means ``u0 / n0`` and ``u1 / n1`` differ by more than eps_cut, with
    ``dd = ln(2 ln(n) / delta)`` and ``v`` the window's variance over ``n`` (one pass of the
    check computes them once; MOA recomputes them for every bucket)."""
    m = 1.0 / (n0 - min_len + 1.0) + 1.0 / (n1 - min_len + 1.0)
    diff = abs(u0 / n0 - u1 / n1)
    linear = 2.0 / 3.0 * dd * m
    if diff <= linear:  # eps_cut >= its linear term: no cut, without the square root (exact:
        return False  # adding sqrt(...) >= 0 cannot round below it; a NaN root cuts nothing)
    return diff > sqrt_or_nan(2.0 * m * v * dd) + linear  # NaN (no cut) when v < 0


@nb.njit(cache=True, inline="always")
def adwin_update(st, d, x, delta, clock, min_len):
    """Add value ``x`` to detector d's window; True if the window shrank (a change)."""
    w = st.iv[d, WIDTH]
    if w > 0:
        mu = st.fs[d, TOTAL] / w
        st.fs[d, VARIANCE] += w * (x - mu) * (x - mu) / (w + 1.0)
    st.fs[d, TOTAL] += x
    st.iv[d, WIDTH] = w + 1
    c = st.cnt[d, 0]
    st.tot[d, 0, c] = x
    st.var[d, 0, c] = 0.0
    st.cnt[d, 0] = c + 1
    if st.iv[d, N_LEVELS] == 0:
        st.iv[d, N_LEVELS] = 1
    _compress(st, d)
    st.iv[d, TICKS] += 1
    if st.iv[d, TICKS] % clock != 0 or st.iv[d, WIDTH] <= min_len:
        return False
    change = False
    shrink = True
    while shrink:
        shrink = False
        n = float(st.iv[d, WIDTH])
        dd = math.log(2.0 * math.log(n) / delta)  # (the same for every bucket of this pass)
        v = st.fs[d, VARIANCE] / n
        n0 = 0.0
        n1 = n
        u0 = 0.0
        u1 = st.fs[d, TOTAL]
        for lev in range(st.iv[d, N_LEVELS] - 1, -1, -1):  # oldest buckets first
            size = float(1 << lev)
            for b in range(st.cnt[d, lev]):
                if lev == 0 and b == st.cnt[d, 0] - 1:
                    break  # W1 would be empty
                n0 += size
                n1 -= size
                u0 += st.tot[d, lev, b]
                u1 -= st.tot[d, lev, b]
                if n0 >= min_len and n1 >= min_len and _cut(n0, n1, u0, u1, dd, v, min_len):
                    shrink = True
                    break
            if shrink:
                break
        if shrink:
            change = True
            _drop_oldest(st, d)
            if st.iv[d, WIDTH] <= min_len:
                break
    if change:
        st.iv[d, N_CHANGES] += 1
    return change


@nb.njit(cache=True)
def adwin_feed(st, d, xs, delta, clock, min_len, out):
    """Feed values ``xs`` to detector d; ``out[i]`` is True where value i raised a change."""
    for i in range(xs.shape[0]):
        out[i] = adwin_update(st, d, xs[i], delta, clock, min_len)


class ADWIN:
    """One ADWIN detector (the compiled kernels over one row of arrays), for streams of numbers.

    The ensembles keep one detector per member in the same arrays and call the kernels directly;
    this class is the standalone form (tests, notebooks).

    Parameters
    ----------
    delta
        Confidence of a cut: a smaller ``delta`` gives fewer false alarms and later detections.
    clock
        Cuts are checked every ``clock`` values (MOA: 32).
    min_len
        Neither sub-window of a cut may be shorter (MOA: 5).

    Examples
    --------
    >>> from ensembles.adwin import ADWIN
    >>> det = ADWIN(delta=0.002)
    >>> changes = det.update_many([0.0] * 1000 + [1.0] * 200)
    >>> int(changes.argmax()) > 1000, det.n_changes >= 1, det.estimation > 0.5
    (True, True, True)
    """

    def __init__(self, *, delta: float = 0.002, clock: int = 32, min_len: int = 5):
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if clock < 1 or min_len < 1:
            raise ValueError("clock and min_len must be >= 1")
        self.delta = float(delta)
        self.clock = int(clock)
        self.min_len = int(min_len)
        self._st = adwin_state(1)

    def update(self, x: float) -> bool:
        """Add one value; True if a change was detected (the window dropped its oldest part)."""
        return bool(self.update_many([x])[0])

    def update_many(self, xs) -> np.ndarray:
        """Add values in order; a boolean array, True where a value raised a change."""
        xs = np.asarray(xs, dtype=np.float64)
        out = np.zeros(len(xs), dtype=np.bool_)
        kernel(adwin_feed)(self._st, 0, xs, self.delta, self.clock, self.min_len, out)
        return out

    @property
    def width(self) -> int:
        """Values in the window."""
        return int(self._st.iv[0, WIDTH])

    @property
    def estimation(self) -> float:
        """Mean of the window."""
        return float(kernel(adwin_estimate)(self._st, 0))

    @property
    def variance(self) -> float:
        """Variance of the window's values."""
        return float(self._st.fs[0, VARIANCE] / max(self.width, 1))

    @property
    def n_changes(self) -> int:
        """Changes detected so far."""
        return int(self._st.iv[0, N_CHANGES])


one_specialisation(globals())  # after every kernel: one compiled version per argument type
