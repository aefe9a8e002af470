"""Production store: Redis (a Stream per model as its log, Lua for atomic appends).

Keys (``{name}`` is a hash tag, so one model's keys share a Redis Cluster slot)::

    chorus:models              SET of model names (listing only; a superset, see below)
    chorus:data                the data's id (``data_id``; never deleted: gone = data lost)
    chorus:m:{name}:spec       the declared spec (JSON)
    chorus:m:{name}:inc        the model's incarnation (absent: a legacy model, "")
    chorus:m:{name}:seq        last sequence number appended
    chorus:m:{name}:log        STREAM, entry id "<seq>-0", field "r" = the record
    chorus:m:{name}:snap       HASH {seq, blob, pseq, pblob} (current + previous generation)
    chorus:m:{name}:ids        HASH idempotency key -> stored response
    chorus:m:{name}:idz        ZSET idempotency key -> seq of its entry (forgetting by seq)
    chorus:m:{name}:lease      writer lease (only with several writing processes)
    chorus:m:{name}:fence      SET of request tokens of appends settled as not applied (a day)
    chorus:m:{name}:p:<pid>    kept prediction (the record holds its expiry; the key lives TTL + max(TTL, 60 s))
    chorus:m:{name}:pz         ZSET pid -> time kept (the per-model bound; expires with the
                               newest kept prediction)

Every script and transaction touches one model's keys only, so in a Redis Cluster it runs in that
model's slot. The index ``chorus:models`` is one more key (its own slot) and is written by separate
commands, in an order that keeps it a superset of the declared models: create adds the name, then
writes the spec, then adds the name again; delete drops the model's keys, then the name, then adds
the name back if the model exists again (a create ran meanwhile). A crash between two of them
leaves a name without a spec, which listing skips (a later create of that name reuses it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.stores.base import (
    DuplicateKey,
    Entry,
    ModelGone,
    OutcomeUnknown,
    SeqConflict,
    StoreConfigError,
    StoreDown,
    incarnation_of,
    new_incarnation,
    raises_store_errors,
)

# Prefix of the scripts that write one model: gone(spec key, inc key, incarnation) tells whether
# the model is not there or not that incarnation ('*': any; a missing inc key is legacy, '').
_GONE = """
local function gone(spec, inc, want)
  if redis.call('EXISTS', spec) == 0 then return true end
  return want ~= '*' and (redis.call('GET', inc) or '') ~= want
end
"""


def _inc(incarnation: str | None) -> str:
    """The scripts' incarnation argument (``None``: check none)."""
    return "*" if incarnation is None else incarnation


# KEYS: spec, seq, log, ids, idz, inc, fence. ARGV: expected_seq, n, incarnation, then n x
# (record, key, response), then the request token. Everything is checked before the first write,
# so a refused append writes nothing. The token goes with the last entry (field "t"); a token in
# ``fence`` (an append whose answer was lost and that _RESOLVE settled as not applied) is refused.
_APPEND = (
    _GONE
    + """
if gone(KEYS[1], KEYS[6], ARGV[3]) then return {-2, 0} end
local n = tonumber(ARGV[2])
local token = ARGV[4 + 3 * n]
if redis.call('SISMEMBER', KEYS[7], token) == 1 then return {-4, 0} end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur ~= tonumber(ARGV[1]) then return {-1, cur} end
for i = 0, n - 1 do
  local key = ARGV[5 + 3 * i]
  if key ~= '' and redis.call('HEXISTS', KEYS[4], key) == 1 then return {-3, i} end
end
for i = 0, n - 1 do
  cur = cur + 1
  if i == n - 1 then
    redis.call('XADD', KEYS[3], cur .. '-0', 'r', ARGV[4 + 3 * i], 't', token)
  else
    redis.call('XADD', KEYS[3], cur .. '-0', 'r', ARGV[4 + 3 * i])
  end
  local key = ARGV[5 + 3 * i]
  if key ~= '' then
    redis.call('HSET', KEYS[4], key, ARGV[6 + 3 * i])
    redis.call('ZADD', KEYS[5], cur, key)
  end
end
redis.call('SET', KEYS[2], cur)
return {0, cur}
"""
)

# KEYS: seq, log, fence. ARGV: token, expected_seq, n. What became of an append whose answer
# was lost: 1 applied (its last entry carries the token), 0 not applied and now never will be
# (the token is fenced: the append, should it still arrive, refuses itself; or another append
# holds those seqs, which the conditional append cannot pass), -1 unknown (the log moved past
# it and was trimmed there).
_RESOLVE = """
local last = tonumber(ARGV[2]) + tonumber(ARGV[3])
local found = redis.call('XRANGE', KEYS[2], last .. '-0', last .. '-0')
if #found == 1 then
  local fields = found[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 't' and fields[i + 1] == ARGV[1] then return 1 end
  end
  return 0
end
if tonumber(redis.call('GET', KEYS[1]) or '0') >= last then return -1 end
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], 86400000)
return 0
"""

# KEYS: spec, seq, snap, inc. ARGV: seq, blob, incarnation. A snapshot never replaces a newer
# one; a newer one shifts the current snapshot to the previous generation (pseq, pblob). Returns
# the oldest kept seq (the log may be trimmed up to it), -2 when the model is gone.
_SNAPSHOT = (
    _GONE
    + """
if gone(KEYS[1], KEYS[4], ARGV[3]) then return -2 end
local seq = tonumber(ARGV[1])
local have = tonumber(redis.call('HGET', KEYS[3], 'seq') or '-1')
if seq > have then
  if have >= 0 then
    redis.call('HSET', KEYS[3], 'pseq', have, 'pblob', redis.call('HGET', KEYS[3], 'blob'))
  end
  redis.call('HSET', KEYS[3], 'seq', ARGV[1], 'blob', ARGV[2])
elseif seq == have then
  redis.call('HSET', KEYS[3], 'blob', ARGV[2])
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq > cur then redis.call('SET', KEYS[2], ARGV[1]) end
return tonumber(redis.call('HGET', KEYS[3], 'pseq') or redis.call('HGET', KEYS[3], 'seq'))
"""
)

# KEYS: ids, idz. ARGV: seq, limit. Forget up to ``limit`` ids of entries at or before seq;
# returns how many (call again while it is ``limit``).
_FORGET = """
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #old == 0 then return 0 end
redis.call('HDEL', KEYS[1], unpack(old))
redis.call('ZREM', KEYS[2], unpack(old))
return #old
"""

# KEYS: spec, ids, idz, inc. ARGV: incarnation, n x (key, seq, response). Ids recorded at a
# snapshot (durability none), the ones already there kept; -2 when the model is gone.
_PUT_KEYS = (
    _GONE
    + """
if gone(KEYS[1], KEYS[4], ARGV[1]) then return -2 end
for i = 2, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 2]) == 1 then
    redis.call('ZADD', KEYS[3], ARGV[i + 1], ARGV[i])
  end
end
return 0
"""
)
# KEYS: spec, log, inc. ARGV: the first seq kept, incarnation.
_TRIM = (
    _GONE
    + """
if gone(KEYS[1], KEYS[3], ARGV[2]) then return 0 end
return redis.call('XTRIM', KEYS[2], 'MINID', ARGV[1] .. '-0')
"""
)

# KEYS: the data id. ARGV: a new id, set if there is none.
_DATA_ID = """
local cur = redis.call('GET', KEYS[1])
if cur then return cur end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""
_FORGET_BATCH = 1000  # ids per script call (Lua's unpack limit, and Redis stays responsive)

# KEYS: lease. ARGV: token.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: lease. ARGV: token, ttl ms. Take a free lease or extend our own.
_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: spec first, then every other per-model key. Returns whether the model existed.
_DELETE = """
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', unpack(KEYS))
return existed
"""

# KEYS: spec first, then every other per-model key, the incarnation's last. ARGV: spec JSON,
# incarnation.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('SET', KEYS[#KEYS], ARGV[2]) end
return 1
"""

_MODELS = "chorus:models"
_DATA = "chorus:data"
_PARTS = ("spec", "seq", "log", "snap", "ids", "idz", "lease", "pz", "inc", "fence")


def _k(name: str, part: str) -> str:
    return f"chorus:m:{{{name}}}:{part}"


def _not_sent(exc: BaseException) -> bool:
    """Whether a failed call surely never reached Redis: no connection could be made (redis-py
    says "connecting to"); any other failure may come after the command went out."""
    return isinstance(exc, redis.exceptions.ConnectionError | OSError) and (
        "connecting to" in str(exc)
    )


@raises_store_errors
class RedisStore:
    """A :class:`~app.stores.base.Store` on Redis (redis-py asyncio client).

    redis-py's own retries are off: a failed call surfaces as ``ConnectionError`` (503 to the
    client, nothing half-applied); the next call reconnects by itself once Redis is back.

    Parameters
    ----------
    url
        ``redis://host:port/db``.
    timeout
        Socket (and connect) timeout in seconds.
    """

    name = "redis"
    DRIVER_ERRORS: tuple[type[Exception], ...] = (redis.exceptions.RedisError, OSError)

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self.url = url
        self.timeout = timeout
        self._r: aioredis.Redis | None = None
        self._append = None
        self._snapshot = None
        self._acquire = None
        self._release = None
        self._create = None
        self._delete = None
        self._forget = None
        self._put_keys = None
        self._trim = None
        self._data_id = None
        self._resolve = None
        self._tokens = itertools.count()
        self._token_prefix = secrets.token_hex(6)  # this client: tokens are unique per append

    @property
    def r(self) -> aioredis.Redis:
        if self._r is None:
            raise redis.exceptions.ConnectionError("store is closed")
        return self._r

    def _client(self) -> Any:
        """A new client (not connected yet)."""
        return aioredis.Redis.from_url(self.url, **self._options())

    def _options(self) -> dict[str, Any]:
        """Client options both stores use: timeouts, and no retries of redis-py's own."""
        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry": Retry(NoBackoff(), 0),
            "decode_responses": False,
        }

    async def _check_mode(self) -> None:
        """Refuse a Redis Cluster node behind a ``redis://`` URL (its other slots answer MOVED)."""
        try:
            info = await self.r.info("cluster")
        except redis.exceptions.ResponseError:  # INFO not allowed (ACL): nothing to check
            return
        if int(info.get("cluster_enabled", 0)):
            raise StoreConfigError(
                f"{self.url} is a Redis Cluster node: use redis+cluster://host:port[,host:port...] "
                "(CHORUS_REDIS_URL) so that every model's slot is reached"
            )

    async def open(self, timeout: float = 30.0) -> None:
        if self._r is not None:
            await self._r.aclose()
        self._r = self._client()
        self._delete = self._r.register_script(_DELETE)
        self._append = self._r.register_script(_APPEND)
        self._snapshot = self._r.register_script(_SNAPSHOT)
        self._acquire = self._r.register_script(_ACQUIRE)
        self._create = self._r.register_script(_CREATE)
        self._release = self._r.register_script(_RELEASE)
        self._forget = self._r.register_script(_FORGET)
        self._put_keys = self._r.register_script(_PUT_KEYS)
        self._trim = self._r.register_script(_TRIM)
        self._data_id = self._r.register_script(_DATA_ID)
        self._resolve = self._r.register_script(_RESOLVE)
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:  # startup waits for PING, bounded
            try:
                await self._r.ping()
                break
            except (
                redis.exceptions.ConnectionError,
                redis.exceptions.TimeoutError,
                redis.exceptions.BusyLoadingError,
            ):
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        await self._check_mode()

    async def close(self) -> None:
        if self._r is not None:
            await self._r.aclose()
            self._r = None

    async def ping(self) -> bool:
        try:
            return bool(await self.r.ping())
        except redis.exceptions.RedisError:
            return False

    async def create_model(self, name: str, spec: dict[str, Any]) -> bool:
        # the index first (never a model it does not list), again after (a delete racing us may
        # have dropped the name between the two): see the module docstring
        await self.r.sadd(_MODELS, name)
        keys = [_k(name, p) for p in _PARTS]
        ok = await self._create(keys=keys, args=[json.dumps(spec), incarnation_of(spec)])
        if ok:
            await self.r.sadd(_MODELS, name)
        return bool(ok)

    async def data_id(self) -> str:
        return (await self._data_id(keys=[_DATA], args=[new_incarnation()])).decode()

    async def get_model(self, name: str) -> dict[str, Any] | None:
        raw = await self.r.get(_k(name, "spec"))
        return json.loads(raw) if raw is not None else None

    async def list_models(self) -> dict[str, dict[str, Any]]:
        names = sorted(n.decode() for n in await self.r.smembers(_MODELS))
        if not names:
            return {}
        specs = await self._mget([_k(n, "spec") for n in names])
        # a name without a spec: a create or delete stopped half-way (see the module docstring)
        return {n: json.loads(s) for n, s in zip(names, specs, strict=True) if s is not None}

    async def _mget(self, keys: list[str]) -> list[bytes | None]:
        return await self.r.mget(keys)

    def _prediction_keys(self, name: str) -> Any:
        """Async iterator over the model's kept-prediction keys."""
        return self.r.scan_iter(match=_k(name, "p:*"), count=1000)

    async def delete_model(self, name: str) -> bool:
        # one DEL: the spec and the log go together (a half-deleted model cannot be recreated
        # on top of a stale log); kept predictions expire by themselves, but go now if we can
        existed = await self._delete(keys=[_k(name, p) for p in _PARTS])
        await self.r.srem(_MODELS, name)
        if await self.r.exists(_k(name, "spec")):  # created again meanwhile: keep it listed
            await self.r.sadd(_MODELS, name)
        async for key in self._prediction_keys(name):
            await self.r.delete(key)
        return bool(existed)

    async def append(
        self, name: str, entries: list[Entry], expected_seq: int, incarnation: str | None = None
    ) -> int:
        args: list[Any] = [expected_seq, len(entries), _inc(incarnation)]
        for e in entries:
            args += [e.record, e.key or "", e.response or b"" if e.key else b""]
        token = f"{self._token_prefix}.{next(self._tokens)}"
        args.append(token)
        keys = [_k(name, p) for p in ("spec", "seq", "log", "ids", "idz", "inc", "fence")]
        try:
            code, value = await self._append(keys=keys, args=args)
        except self.DRIVER_ERRORS as exc:
            if _not_sent(exc):
                raise
            raise OutcomeUnknown(
                f"{self.name} store: {type(exc).__name__}: {exc}", token, expected_seq, len(entries)
            ) from exc
        if code == 0:
            return int(value)
        if code == -1:
            raise SeqConflict(int(value))
        if code == -2:
            raise ModelGone(name)
        if code == -4:  # (a token is used once: only a duplicated call can meet its fence)
            raise StoreDown(f"append {token} was settled as not applied")
        raise DuplicateKey(entries[int(value)].key or "")

    async def resolve(self, name: str, token: str, expected_seq: int, n: int) -> bool | None:
        """What became of the append that raised :class:`~app.stores.base.OutcomeUnknown`:
        ``True`` applied, ``False`` not applied and never will be, ``None`` unknown (its
        entries were trimmed after another process appended past them)."""
        keys = [_k(name, "seq"), _k(name, "log"), _k(name, "fence")]
        code = int(await self._resolve(keys=keys, args=[token, expected_seq, n]))
        return None if code < 0 else bool(code)

    async def read(self, name: str, after_seq: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        rows = await self.r.xrange(_k(name, "log"), min=f"{after_seq + 1}-0", max="+", count=limit)
        return [(int(eid.split(b"-")[0]), fields[b"r"]) for eid, fields in rows]

    async def last_seq(self, name: str) -> int:
        raw = await self.r.get(_k(name, "seq"))
        return int(raw) if raw is not None else 0

    async def put_snapshot(
        self, name: str, seq: int, blob: bytes, incarnation: str | None = None
    ) -> int:
        keys = [_k(name, p) for p in ("spec", "seq", "snap", "inc")]
        oldest = int(await self._snapshot(keys=keys, args=[seq, blob, _inc(incarnation)]))
        if oldest == -2:
            raise ModelGone(name)
        return oldest

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        seq, blob = await self.r.hmget(_k(name, "snap"), ["seq", "blob"])
        if seq is None or blob is None:
            return None
        return int(seq), bytes(blob)

    async def get_snapshots(self, name: str) -> list[tuple[int, bytes]]:
        fields = ["seq", "blob", "pseq", "pblob"]
        seq, blob, pseq, pblob = await self.r.hmget(_k(name, "snap"), fields)
        gens = [(s, b) for s, b in ((seq, blob), (pseq, pblob)) if s is not None and b is not None]
        return [(int(s), bytes(b)) for s, b in gens]

    async def trim(self, name: str, upto_seq: int, incarnation: str | None = None) -> None:
        keys = [_k(name, p) for p in ("spec", "log", "inc")]
        await self._trim(keys=keys, args=[upto_seq + 1, _inc(incarnation)])

    async def get_answers(self, name: str, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(keys), 1000):
            part = keys[i : i + 1000]
            vals = await self.r.hmget(_k(name, "ids"), part)
            out.update((k, bytes(v)) for k, v in zip(part, vals, strict=True) if v is not None)
        return out

    async def key_names(self, name: str) -> list[str]:
        ids, idz = _k(name, "ids"), _k(name, "idz")
        if await self.r.hlen(ids) > await self.r.zcard(idz):
            await self._index_old_keys(name)
        return [k.decode() for k in await self.r.zrange(idz, 0, -1)]

    async def _index_old_keys(self, name: str) -> None:
        """Ids stored before ``idz`` existed: index them by the ``seq`` of their stored answer
        (once; ``ZADD NX`` leaves the ones already indexed alone)."""
        batch: dict[str, float] = {}
        async for k, v in self.r.hscan_iter(_k(name, "ids"), count=1000):
            try:
                batch[k.decode()] = float(json.loads(v)["seq"])
            except (ValueError, KeyError, TypeError):
                batch[k.decode()] = 0.0  # no seq to read: forgotten at the next snapshot
            if len(batch) >= 1000:
                await self.r.zadd(_k(name, "idz"), batch, nx=True)
                batch = {}
        if batch:
            await self.r.zadd(_k(name, "idz"), batch, nx=True)

    async def put_keys(
        self, name: str, items: list[tuple[str, int, bytes]], incarnation: str | None = None
    ) -> None:
        keys = [_k(name, p) for p in ("spec", "ids", "idz", "inc")]
        for i in range(0, len(items), 1000):
            args: list[Any] = [_inc(incarnation)]
            for key, seq, resp in items[i : i + 1000]:
                args += [key, seq, resp]
            if await self._put_keys(keys=keys, args=args) == -2:
                raise ModelGone(name)

    async def forget_keys(self, name: str, upto_seq: int) -> None:
        keys = [_k(name, "ids"), _k(name, "idz")]
        while await self._forget(keys=keys, args=[upto_seq, _FORGET_BATCH]) == _FORGET_BATCH:
            pass

    async def put_prediction(self, name: str, pid: str, blob: bytes, ttl: float) -> None:
        await self.put_predictions([(name, pid, blob)], ttl)

    async def put_predictions(
        self, items: list[tuple[str, str, bytes]], ttl: float, *, max_per_model: int | None = None
    ) -> set[str]:
        keep = ttl + max(ttl, 60.0)  # expired ones linger a while so they answer 410, not 404
        px = max(1, int(1000 * keep))
        now = time.time()
        async with self.r.pipeline(transaction=False) as pipe:
            for name, pid, blob in items:
                pipe.set(_k(name, f"p:{pid}"), blob, px=px)
                if max_per_model is not None:  # index by time: the oldest go first
                    pipe.zadd(_k(name, "pz"), {pid: now})
                    pipe.pexpire(_k(name, "pz"), px)  # (a deleted model's index goes too)
            await pipe.execute()
        if max_per_model is None:
            return set()
        for name in {name for name, _, _ in items}:
            pz = _k(name, "pz")
            await self.r.zremrangebyscore(pz, "-inf", now - keep)  # expired by themselves
            excess = await self.r.zcard(pz) - max_per_model
            if excess > 0:
                old = await self.r.zpopmin(pz, excess)
                await self.r.delete(*[_k(name, f"p:{pid.decode()}") for pid, _ in old])
        return set()  # one server: all kept, or an error

    async def get_prediction(self, name: str, pid: str) -> bytes | None:
        raw = await self.r.get(_k(name, f"p:{pid}"))
        return bytes(raw) if raw is not None else None

    async def acquire_writer(self, name: str, token: str, ttl: float) -> bool:
        px = max(1, int(ttl * 1000))
        return bool(await self._acquire(keys=[_k(name, "lease")], args=[token, px]))

    async def release_writer(self, name: str, token: str) -> None:
        await self._release(keys=[_k(name, "lease")], args=[token])
