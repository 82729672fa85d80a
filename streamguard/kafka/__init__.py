"""The Kafka side of streamguard: ``streamguard run``.

:mod:`.config` (settings from flags and environment), :mod:`.processor` (the
consumer-group stream processor), :mod:`.changelog` (session snapshots on a
compacted topic), :mod:`.metrics` and :mod:`.health` (Prometheus and probes),
:mod:`.broker` (a local Kafka-protocol broker for tests and demos).
"""
