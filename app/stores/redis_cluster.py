"""Redis Cluster store: the Redis store's keys, scripts and order of writes, on redis-py's cluster
client (``redis.asyncio.cluster.RedisCluster``).

Selected by ``CHORUS_REDIS_URL=redis+cluster://host:port[,host:port...]`` (``rediss+cluster://``
for TLS; ``user:password@`` before the first node when the cluster needs AUTH). The nodes are seed
nodes: any reachable one gives the client the slot map. Everything of one model carries the hash
tag ``{name}`` and so lives in one slot: its Lua scripts and pipelines never cross slots. The model
index ``chorus:models`` is a single key in a slot of its own, written by separate commands in the
order :mod:`app.stores.redis` documents, so listing tolerates a create or delete stopped half-way.

Failure behaviour: a model whose slot's master is unreachable answers 503 (the call's connection
error or ``CLUSTERDOWN``); models in the other slots keep working when the cluster runs with
``cluster-require-full-coverage no``. Listing (``GET /models``, start-up recovery) needs every
master that holds a model's spec, and the index's master.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import unquote

import redis.exceptions
from redis.asyncio.cluster import ClusterNode, RedisCluster

from app.stores.base import StoreConfigError, StoreDown, raises_store_errors
from app.stores.redis import RedisStore, _k

SCHEMES = ("redis+cluster", "rediss+cluster")


def parse_cluster_url(url: str) -> dict[str, Any]:
    """Split ``redis+cluster://[user:password@]host:port[,host:port...]`` into client options.

    Parameters
    ----------
    url
        The URL (``rediss+cluster://`` turns TLS on).

    Returns
    -------
    dict
        ``startup_nodes`` (host, port) pairs, ``username``, ``password``, ``ssl``.

    Raises
    ------
    ValueError
        Naming what is wrong with the URL.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise ValueError(
            f"{url!r}: a cluster URL starts with redis+cluster:// or rediss+cluster://"
        )
    netloc, _, path = rest.partition("/")
    if path not in ("", "0"):
        raise ValueError(f"{url!r}: Redis Cluster has database 0 only (no /{path})")
    auth, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, pw = auth.partition(":")
        username, password = (unquote(user) or None), (unquote(pw) if colon else None)
    nodes = []
    for part in hosts.split(","):
        host, colon, port = part.strip().rpartition(":")
        host = host.strip("[]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{url!r}: {part.strip()!r} is not host:port")
        nodes.append((host, int(port)))
    return {
        "startup_nodes": nodes,
        "username": username,
        "password": password,
        "ssl": scheme == "rediss+cluster",
    }


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` selects the Redis Cluster store."""
    return url.partition("://")[0] in SCHEMES


@raises_store_errors
class RedisClusterStore(RedisStore):
    """A :class:`~app.stores.base.Store` on a Redis Cluster (the Redis store on a cluster client).

    Parameters
    ----------
    url
        ``redis+cluster://host:port[,host:port...]``.
    timeout
        Socket (and connect) timeout in seconds.
    """

    name = "redis-cluster"
    DRIVER_ERRORS = (
        redis.exceptions.RedisError,
        redis.exceptions.RedisClusterException,  # no node of the slot's map answers
        OSError,
    )

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        super().__init__(url, timeout)
        self._conf = parse_cluster_url(url)

    def _client(self) -> Any:
        nodes = [ClusterNode(h, p) for h, p in self._conf["startup_nodes"]]
        return RedisCluster(
            startup_nodes=nodes,
            username=self._conf["username"],
            password=self._conf["password"],
            ssl=self._conf["ssl"],
            require_full_coverage=False,  # a lost master costs its slots only
            **self._options(),
        )

    async def open(self, timeout: float = 30.0) -> None:
        """Connect and read the slot map, waiting at most ``timeout`` seconds.

        Unlike a single Redis (whose start-up waits on, reporting 503), a cluster that cannot be
        reached or is not a cluster fails start-up with :class:`StoreConfigError`.
        """
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                await super().open(timeout=max(0.0, deadline - time.monotonic()))
                await self.r.initialize()
                return
            except StoreConfigError:
                raise
            except (StoreDown, *self.DRIVER_ERRORS) as exc:  # super().open raises StoreDown
                msg = str(exc).lower()
                if "cluster support disabled" in msg or "cluster mode is not enabled" in msg:
                    raise StoreConfigError(
                        f"{self.url}: the server is not a Redis Cluster node (use redis://)"
                    ) from exc
                if time.monotonic() >= deadline:
                    nodes = ",".join(f"{h}:{p}" for h, p in self._conf["startup_nodes"])
                    raise StoreConfigError(
                        f"Redis Cluster at {nodes} unreachable for {timeout:g} s "
                        f"(CHORUS_STARTUP_TIMEOUT): {exc}"
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _check_mode(self) -> None:
        """The cluster client refuses a server without cluster support by itself."""

    async def ping(self) -> bool:
        """Whether some master answers: one lost master costs its slots, not the instance."""
        try:
            primaries = self.r.get_primaries()
        except redis.exceptions.ConnectionError:
            return False
        for node in primaries:
            try:
                if await self.r.ping(target_nodes=node):
                    return True
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException):
                continue
        return False

    async def put_predictions(
        self, items: list[tuple[str, str, bytes]], ttl: float, *, max_per_model: int | None = None
    ) -> set[str]:
        """One pipeline per model (its slot's master), all at once: a lost master costs the
        predictions of its models only, the others are kept."""
        by_model: dict[str, list[tuple[str, str, bytes]]] = {}
        for item in items:
            by_model.setdefault(item[0], []).append(item)
        names = list(by_model)
        put = super().put_predictions
        done = await asyncio.gather(
            *(put(by_model[n], ttl, max_per_model=max_per_model) for n in names),
            return_exceptions=True,
        )
        failed = {n for n, r in zip(names, done, strict=True) if isinstance(r, BaseException)}
        for r in done:
            if isinstance(r, BaseException) and not isinstance(r, (StoreDown, *self.DRIVER_ERRORS)):
                raise r  # a bug, not a lost master
        if failed and len(failed) == len(names):
            raise next(r for r in done if isinstance(r, BaseException))
        return failed

    async def _mget(self, keys: list[str]) -> list[bytes | None]:
        return await self.r.mget_nonatomic(keys)  # one MGET per slot, pipelined per node

    def _prediction_keys(self, name: str) -> Any:
        node = self.r.get_node_from_key(_k(name, "spec"))  # the model's slot's master only
        return self.r.scan_iter(match=_k(name, "p:*"), count=1000, target_nodes=node)
