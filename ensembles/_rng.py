"""Counter-based Poisson draws (ARCHITECTURE §4).

``k = poisson(lam, seed, seq, member)`` is a pure function: the uniforms it consumes are
``splitmix64`` hashes of ``(seed, seq, member, j)``, so the same seed and the same ordered stream
give the same draws on any machine, after any number of restarts, with no RNG state to save.

Small rates (``lam < 10``) use CDF inversion with one uniform; larger rates (online boosting can
push ``lambda`` far above 1) use Hörmann's PTRS transformed rejection (1993), the method numpy uses.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


@nb.njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@nb.njit(cache=True)
def uniform(seed, seq, member, j):
    """A uniform in [0, 1) that depends only on ``(seed, seq, member, j)``."""
    h = _mix(np.uint64(seed) + _GOLDEN)
    h = _mix(h ^ (np.uint64(seq) * _GOLDEN + _M1))
    h = _mix(h ^ (np.uint64(member) * _M2 + _GOLDEN))
    h = _mix(h ^ (np.uint64(j) + _M2))
    return np.float64(h >> _S11) * _INV53


@nb.njit(cache=True)
def poisson(lam, seed, seq, member):
    """Draw k ~ Poisson(lam) keyed by ``(seed, seq, member)``."""
    if lam <= 0.0:
        return 0
    if lam < 10.0:
        u = uniform(seed, seq, member, 0)
        p = math.exp(-lam)
        cdf = p
        k = 0
        while u > cdf and k < 200:
            k += 1
            p *= lam / k
            cdf += p
        return k
    # PTRS (Hörmann 1993), two uniforms per attempt.
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    j = 0
    while True:
        u = uniform(seed, seq, member, j) - 0.5
        v = uniform(seed, seq, member, j + 1)
        j += 2
        us = 0.5 - abs(u)
        k = int(math.floor((2.0 * a / us + b) * u + lam + 0.43))
        if us >= 0.07 and v <= vr:
            return k
        if k < 0 or (us < 0.013 and v > us):
            continue
        if (math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b)) <= (
            -lam + k * loglam - math.lgamma(k + 1.0)
        ):
            return k


@nb.njit(cache=True)
def poisson_block(lam, seed, seq0, n, member):
    """``n`` draws for consecutive sequence numbers ``seq0 .. seq0+n-1`` (used by tests/priming)."""
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = poisson(lam, seed, seq0 + i, member)
    return out


@nb.njit(cache=True)
def uniform_block(seed, seq0, n, member, j):
    """``uniform(seed, seq, member, j)`` for ``seq = seq0 .. seq0+n-1``, in one compiled call."""
    out = np.empty(n)
    for i in range(n):
        out[i] = uniform(seed, seq0 + i, member, j)
    return out


one_specialisation(globals())  # after every kernel: one compiled version per argument type
