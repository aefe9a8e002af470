"""Canonical state: what ``to_state`` saves, each member's live rows renumbered in the order of a
walk of its tree and its class blocks laid out as a compaction would (``canonical``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from learners.jit import compiled_cold, one_specialisation

from .layout import NUM_STATS, SETTLED
from .rows import block_cap


@nb.njit(cache=True)
def _renumbered(mp, i):
    """Row ``i`` renumbered through ``mp`` (-1 stays -1)."""
    return mp[i] if i >= 0 else -1


@nb.njit(cache=True)
def _move_block(cls, val, width, at, ln, m, row, tc, tv, t_at, t_ln, to, pos):
    """Copy the class block of ``row`` (headers ``at``/``ln``) to ``pos`` of ``tc``/``tv`` as the
    block of row ``to`` (headers ``t_at``/``t_ln``); returns the next block's position (blocks
    keep their capacity, ``block_cap``, as compaction lays them)."""
    n = ln[m, row]
    t_ln[m, to] = n
    if n == 0:
        return pos  # (t_at stays -1)
    a = at[m, row]
    t_at[m, to] = pos
    for i in range(n):
        tc[m, pos + i] = cls[m, a + i]
    for i in range(n * width):
        tv[m, pos * width + i] = val[m, a * width + i]
    return pos + block_cap(n)


@nb.njit(cache=True)
def _move_list(mp, head, tail, pend, t_head, t_tail, t_pend, m, old, new):
    """The (head, tail, pending) of list owner ``old``, renumbered through ``mp``, as owner
    ``new``'s."""
    t_head[m, new] = _renumbered(mp, head[m, old])
    t_tail[m, new] = _renumbered(mp, tail[m, old])
    t_pend[m, new] = _renumbered(mp, pend[m, old])


@nb.njit(cache=True)
def _number(nxt, ln, m, head, pend, mp, order, k, entries):
    """Number the rows of a list (its sorted part from ``head``, then its pending part) from
    k: ``mp[old] = new``, ``order[new] = old``; returns the next number and ``entries`` plus
    their blocks' capacity (row lengths ``ln``)."""
    for i in (head, pend):
        while i >= 0:
            mp[i] = k
            order[k] = i
            k += 1
            entries += block_cap(ln[m, i])
            i = nxt[m, i]
    return k, entries


# the columns of ``canonical``'s ``counts``: a member's live rows of each kind, then the entries
# of its two class-entry pools (their blocks' capacity)
COUNT_NODES, COUNT_SLOTS, COUNT_FEATURES, COUNT_VALUES, COUNT_OBSERVERS = 0, 1, 2, 3, 4
COUNT_WEIGHTS, COUNT_GAUSSIANS = 5, 6
N_COUNTS = 7


@nb.njit(cache=True)
def canonical(T, C, counts, copy):
    """The live part of each member of ``T``, renumbered in the order of a walk of its tree:
    nodes as they are; leaf slots in node order; a slot's feature rows and observers in list
    order (sorted list, then pending list); a feature row's value rows likewise; the class
    blocks of the weight pool as compaction lays them (nodes, feature rows, value rows, each in
    the new order), those of the Gaussian pool in observer order. Freed rows, dead class entries
    and free lists are dropped. ``counts[m]`` gets (nodes, slots, feature rows, value rows,
    observers, weight entries, Gaussian entries: the ``COUNT_*`` columns); with ``copy`` the
    rows are written to ``C`` (allocated for those counts, fresh). Only row numbers and pool
    offsets change: every list keeps its items, order and pending part, so the model goes on
    exactly."""
    for m in range(T.kind.shape[0]):
        # per kind of row (slots, feature rows, value rows, observers): old row -> new, new -> old
        maps = (np.full(T.last.shape[1], -1, np.int64), np.full(T.nvals.shape[1], -1, np.int64),
                np.full(T.v_code.shape[1], -1, np.int64), np.full(T.o_attr.shape[1], -1, np.int64))  # fmt: skip
        orders = (np.empty(T.last.shape[1], np.int64), np.empty(T.nvals.shape[1], np.int64),
                  np.empty(T.v_code.shape[1], np.int64), np.empty(T.o_attr.shape[1], np.int64))  # fmt: skip
        _number_member(T, m, maps, orders, counts)
        if copy:
            _copy_tree(T, C, m, maps, orders, counts)
            _copy_rows(T, C, m, maps, orders, counts)


@nb.njit(cache=True)
def _number_member(T, m, maps, orders, counts):
    """Number member m's live rows in canonical order (``maps``, ``orders``) and count them and
    their pools' entries (``counts[m]``)."""
    smap, fmap, vmap, omap = maps
    sorder, forder, vorder, oorder = orders
    nn = T.n_nodes[m]
    ns = 0
    nf = 0
    nv = 0
    no = 0
    pw = 0
    pg = 0
    for n in range(nn):
        pw += block_cap(T.d_len[m, n])
    for n in range(nn):
        s = T.slot[m, n]
        if s < 0:
            continue
        smap[s] = ns
        sorder[ns] = s
        ns += 1
        nf, pw = _number(T.f_next, T.fw_len, m, T.f_head[m, s], T.f_pend[m, s], fmap, forder,
                         nf, pw)  # fmt: skip
        no, pg = _number(T.o_next, T.g_len, m, T.o_head[m, s], T.o_pend[m, s], omap, oorder,
                         no, pg)  # fmt: skip
    for i in range(nf):
        f = forder[i]
        nv, pw = _number(T.v_next, T.vw_len, m, T.v_head[m, f], T.v_pend[m, f], vmap, vorder,
                         nv, pw)  # fmt: skip
    counts[m, COUNT_NODES] = nn
    counts[m, COUNT_SLOTS] = ns
    counts[m, COUNT_FEATURES] = nf
    counts[m, COUNT_VALUES] = nv
    counts[m, COUNT_OBSERVERS] = no
    counts[m, COUNT_WEIGHTS] = pw
    counts[m, COUNT_GAUSSIANS] = pg


@nb.njit(cache=True)
def _copy_tree(T, C, m, maps, orders, counts):
    """Member m's nodes and leaf slots into ``C``, renumbered (``_number_member``); the nodes'
    class blocks first in the weight pool."""
    smap, fmap, vmap, omap = maps
    sorder = orders[0]
    pos = 0
    for n in range(counts[m, COUNT_NODES]):
        C.kind[m, n] = T.kind[m, n]
        C.attr[m, n] = T.attr[m, n]
        C.thr[m, n] = T.thr[m, n]
        C.slot[m, n] = _renumbered(smap, T.slot[m, n])
        C.child[m, n] = T.child[m, n]
        C.sibling[m, n] = T.sibling[m, n]
        C.branch[m, n] = T.branch[m, n]
        C.depth[m, n] = T.depth[m, n]
        C.merit[m, n] = T.merit[m, n]
        C.split_seen[m, n] = T.split_seen[m, n]
        pos = _move_block(T.wc, T.wv, 1, T.d_at, T.d_len, m, n, C.wc, C.wv, C.d_at, C.d_len,
                          n, pos)  # fmt: skip
    for i in range(counts[m, COUNT_SLOTS]):
        s = sorder[i]
        C.last[m, i] = T.last[m, s]
        C.mc_ok[m, i] = T.mc_ok[m, s]
        C.nb_ok[m, i] = T.nb_ok[m, s]
        _move_list(fmap, T.f_head, T.f_tail, T.f_pend, C.f_head, C.f_tail, C.f_pend, m, s, i)
        _move_list(omap, T.o_head, T.o_tail, T.o_pend, C.o_head, C.o_tail, C.o_pend, m, s, i)
    C.n_nodes[m] = counts[m, COUNT_NODES]
    C.n_slots[m] = counts[m, COUNT_SLOTS]
    C.n_free[m] = 0
    C.w_used[m] = pos  # (the feature and value rows' blocks follow: _copy_rows)


@nb.njit(cache=True)
def _copy_rows(T, C, m, maps, orders, counts):
    """Member m's feature rows, value rows and observers into ``C``, renumbered, their class
    blocks after the nodes' (``_copy_tree``)."""
    smap, fmap, vmap, omap = maps
    forder, vorder, oorder = orders[1], orders[2], orders[3]
    nf = counts[m, COUNT_FEATURES]
    nv = counts[m, COUNT_VALUES]
    no = counts[m, COUNT_OBSERVERS]
    pos = C.w_used[m]
    for i in range(nf):
        f = forder[i]
        C.nvals[m, i] = T.nvals[m, f]
        C.f_attr[m, i] = T.f_attr[m, f]
        C.f_next[m, i] = _renumbered(fmap, T.f_next[m, f])
        _move_list(vmap, T.v_head, T.v_tail, T.v_pend, C.v_head, C.v_tail, C.v_pend, m, f, i)
        pos = _move_block(T.wc, T.wv, 1, T.fw_at, T.fw_len, m, f, C.wc, C.wv, C.fw_at,
                          C.fw_len, i, pos)  # fmt: skip
    for i in range(nv):
        e = vorder[i]
        C.v_code[m, i] = T.v_code[m, e]
        C.v_next[m, i] = _renumbered(vmap, T.v_next[m, e])
        pos = _move_block(T.wc, T.wv, 1, T.vw_at, T.vw_len, m, e, C.wc, C.wv, C.vw_at,
                          C.vw_len, i, pos)  # fmt: skip
    pos_g = 0
    for i in range(no):
        o = oorder[i]
        # saved as 0/1 (stale / fresh), what code before SETTLED reads: a one-entry stale
        # cache becomes all stale, SETTLED fresh (recomputing gives the same numbers)
        fr = T.o_fresh[m, o]
        C.o_fresh[m, i] = 1 if fr == 1 or fr == SETTLED else 0
        C.o_attr[m, i] = T.o_attr[m, o]
        C.o_next[m, i] = _renumbered(omap, T.o_next[m, o])
        pos_g = _move_block(T.gc, T.gv, NUM_STATS, T.g_at, T.g_len, m, o, C.gc, C.gv,
                            C.g_at, C.g_len, i, pos_g)  # fmt: skip
    C.n_f[m] = nf
    C.f_freed[m] = -1
    C.n_v[m] = nv
    C.v_freed[m] = -1
    C.n_o[m] = no
    C.o_freed[m] = -1
    C.w_used[m] = pos
    C.w_dead[m] = 0
    C.g_used[m] = pos_g
    C.g_dead[m] = 0


compiled_cold(canonical)  # run once per model or state (learners.jit)
one_specialisation(globals())  # after every kernel: one compiled version per argument type
