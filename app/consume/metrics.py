"""The consumer's Prometheus metrics: per stream and model, counted as messages are settled."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily

UNKNOWN_MODEL = "<unknown>"  # the model label of a message naming no model that exists (bounded)


class ConsumeMetrics:
    """Counters of one process's consumer (``chorus serve``'s ``/metrics``, or
    ``chorus consume --metrics-port``).

    Parameters
    ----------
    registry
        The Prometheus registry to register in (the app's in ``chorus serve``).

    Attributes
    ----------
    lag
        ``{stream: messages not yet delivered to the group}`` as the consumer last read it from
        the bus (the gauge ``chorus_consume_lag``).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag: dict[str, int] = {}
        labels = ["stream", "model"]
        self.acked = Counter(
            "chorus_consume_acked", "Messages acknowledged (learned, predicted or dead-lettered)",
            labels, registry=registry,
        )  # fmt: skip
        self.learned = Counter(
            "chorus_consume_learned", "Messages learned (new examples and late labels)", labels,
            registry=registry,
        )  # fmt: skip
        self.redelivered = Counter(
            "chorus_consume_redelivered", "Messages delivered more than once (a consumer died or "
            "its acknowledgement was lost)", labels, registry=registry,
        )  # fmt: skip
        self.duplicates = Counter(
            "chorus_consume_duplicates", "Redelivered messages already learned: absorbed by the "
            "idempotency window, not learned again", labels, registry=registry,
        )  # fmt: skip
        self.dead = Counter(
            "chorus_consume_dead_lettered", "Messages sent to the dead-letter stream", labels,
            registry=registry,
        )  # fmt: skip
        self.retried = Counter(
            "chorus_consume_retried", "Messages held for a retry (their model's store failed)",
            labels, registry=registry,
        )  # fmt: skip
        registry.register(_LagCollector(self))


class _LagCollector:
    def __init__(self, metrics: ConsumeMetrics) -> None:
        self.metrics = metrics

    def collect(self):
        g = GaugeMetricFamily(
            "chorus_consume_lag", "Messages in the stream not yet delivered to the group",
            labels=["stream"],
        )  # fmt: skip
        for stream, n in self.metrics.lag.items():
            g.add_metric([stream], float(n))
        yield g
