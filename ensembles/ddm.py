"""DDM, the drift detection method of Gama et al. (2004), compiled, its state in arrays.

For a stream of 0/1 errors, after ``i`` values the error rate is ``p_i`` with standard deviation
``s_i = sqrt(p_i (1 - p_i) / i)``. DDM keeps the point where ``p_i + s_i`` was lowest
(``p_min``, ``s_min``) and, once ``min_n`` values were seen, raises a *warning* when
``p_i + s_i > p_min + 2 s_min`` and a *drift* when ``p_i + s_i > p_min + 3 s_min``; after a
drift it starts afresh. State of ``K`` detectors: ``st [K, 6]`` (n, p, s, p_min, s_min, warning).

References
----------
Gama, J., Medas, P., Castillo, G. & Rodrigues, P. (2004). Learning with drift detection. SBIA.
"""

from __future__ import annotations

import math
from pathlib import Path

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from . import adwin
from ._kernels import purge_stale_cache
from .adwin import sqrt_or_nan

purge_stale_cache(__file__, (Path(str(adwin.__file__)),))  # ddm_update inlines sqrt_or_nan

N, P, S, P_MIN, S_MIN, WARNING = range(6)
NONE, WARN, DRIFT = 0, 1, 2  # levels ddm_update returns
MIN_N = 30  # values before DDM may signal (MOA's and river's default)


def ddm_state(k: int) -> np.ndarray:
    """``k`` fresh detectors."""
    st = np.zeros((k, 6))
    for d in range(k):
        ddm_reset.py_func(st, d)
    return st


@nb.njit(cache=True)
def ddm_reset(st, d):
    """Detector d starts afresh."""
    st[d, N] = 0.0
    st[d, P] = 1.0
    st[d, S] = 0.0
    st[d, P_MIN] = math.inf
    st[d, S_MIN] = math.inf
    st[d, WARNING] = 0.0


@nb.njit(cache=True)
def ddm_update(st, d, err):
    """Add error ``err`` (0 or 1) to detector d: NONE, WARN or DRIFT (then it starts afresh)."""
    st[d, N] += 1.0
    n = st[d, N]
    st[d, P] += (err - st[d, P]) / n
    st[d, S] = sqrt_or_nan(st[d, P] * (1.0 - st[d, P]) / n)
    if n < MIN_N:
        return NONE
    ps = st[d, P] + st[d, S]
    if ps <= st[d, P_MIN] + st[d, S_MIN]:
        st[d, P_MIN] = st[d, P]
        st[d, S_MIN] = st[d, S]
    if ps > st[d, P_MIN] + 3.0 * st[d, S_MIN]:
        ddm_reset(st, d)
        return DRIFT
    warn = ps > st[d, P_MIN] + 2.0 * st[d, S_MIN]
    st[d, WARNING] = 1.0 if warn else 0.0
    return WARN if warn else NONE


@nb.njit(cache=True)
def ddm_feed(st, d, errs, out):
    """Feed errors ``errs`` to detector d; ``out[i]`` the level value i raised."""
    for i in range(errs.shape[0]):
        out[i] = ddm_update(st, d, errs[i])


one_specialisation(globals())  # after every kernel: one compiled version per argument type
