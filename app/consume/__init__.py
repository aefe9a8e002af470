"""Examples from an event bus: ``chorus consume`` (and ``CHORUS_CONSUME`` in ``chorus serve``).

Read in this order (each part is one file):

- :mod:`app.consume.messages` — what a message says (:func:`~app.consume.messages.parse`);
- :mod:`app.consume.consumer` — :class:`~app.consume.consumer.Consumer`: a read becomes one
  engine batch per model through the registry's learn path, acknowledged after the log append;
  dead letters, retries, backpressure; the :class:`~app.consume.consumer.Bus` protocol;
- :mod:`app.consume.redis_bus` — Redis Streams (consumer groups, ``XAUTOCLAIM``);
- :mod:`app.consume.nats_bus` — NATS JetStream (durable pull consumers);
- :mod:`app.consume.config` — the URL and options; :mod:`app.consume.metrics` — Prometheus;
- :mod:`app.consume.run` — on its own (``chorus consume``) or inside ``chorus serve``.
"""
