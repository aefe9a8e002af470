"""Appends whose answer was lost: what became of them, settled before the model is used again.

A Redis append that timed out (or lost its connection) after it was sent may have been applied,
or may still be applied when Redis gets to it: a 503 "nothing applied" would then be a lie (a
client without ids that retries learns the batch twice). Each append carries a request token,
written atomically with its last entry; :func:`settle_lost` asks the store what became of it
(``resolve``: applied, or not applied and fenced so that it never will be). When the store does
not answer that either, the request is told the outcome is unknown and the token stays on the
model (``Handle.unsettled``, with the model dirty): :func:`reconcile` settles it before the model
is rebuilt from its log, so the model and the log agree and nothing else is written first.
"""

from __future__ import annotations

import logging

from app.errors import OutcomeUnknownError, StoreUnavailable
from app.registry.common import STORE_ERRORS, store_call
from app.registry.handles import Handle
from app.stores.base import OutcomeUnknown, Store

log = logging.getLogger("chorus.registry")


async def settle_lost(store: Store, h: Handle, lost: OutcomeUnknown) -> int:
    """Settle an append that raised :class:`OutcomeUnknown` (the caller holds the model's lock).

    Returns the log's new last seq when it was applied (the in-memory model, which learned it,
    agrees with the log again); raises :class:`StoreUnavailable` when it was not (and never
    will be: the model is rebuilt from the log) and :class:`OutcomeUnknownError` when that
    cannot be known now.
    """
    h.dirty = True  # until settled: the model learned what the log may lack
    h.unsettled = lost  # (also if this request is cancelled meanwhile)
    first, last = lost.expected_seq + 1, lost.expected_seq + lost.n
    try:
        applied = await store.resolve(h.name, lost.token, lost.expected_seq, lost.n)  # type: ignore[attr-defined]
    except STORE_ERRORS:
        log.warning("model %s: append of seqs %d..%d unanswered: outcome unknown (%s)",
                    h.name, first, last, lost)  # fmt: skip
        raise OutcomeUnknownError(_unknown(h.name, first, last, str(lost))) from lost
    h.unsettled = None
    if applied:
        h.dirty = False
        log.info("model %s: append of seqs %d..%d unanswered, then found applied",
                 h.name, first, last)  # fmt: skip
        return last
    if applied is None:  # another process appended past it and the log was trimmed there
        raise OutcomeUnknownError(_unknown(h.name, first, last, "its entries were trimmed"))
    raise StoreUnavailable(f"store unavailable, nothing applied: {lost}")


async def reconcile(store: Store, h: Handle) -> None:
    """Settle the model's unsettled append, if any, before it is rebuilt from its log and written
    again (the caller holds the model's lock); :class:`StoreUnavailable` while the store does not
    answer (nothing was attempted)."""
    lost = h.unsettled
    if lost is None:
        return
    applied = await store_call(store.resolve(h.name, lost.token, lost.expected_seq, lost.n))  # type: ignore[attr-defined]
    h.unsettled = None
    log.warning("model %s: the append of seqs %d..%d whose outcome was unknown was %s", h.name,
                lost.expected_seq + 1, lost.expected_seq + lost.n,
                {True: "applied", False: "not applied (and never will be)"}.get(applied, "trimmed"))  # fmt: skip


def _unknown(name: str, first: int, last: int, why: str) -> str:
    return (
        f"outcome unknown: the store did not confirm the append of model {name!r}'s seqs "
        f"{first}..{last} ({why}); it may have been applied. Do not resend without ids: resend "
        "with the same ids (an applied example is answered duplicate: true), or, once the store "
        f"answers, read GET /models/{name} (its seq is {last} or more if it was applied, "
        f"{first - 1} if not and no one else wrote since)"
    )
