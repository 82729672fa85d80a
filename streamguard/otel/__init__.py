"""OpenTelemetry ingest: OTLP spans and logs in, contract-v1 events out.

* :mod:`.otlp` decodes OTLP (protobuf or OTLP/JSON) into plain records, with
  every size and nesting bounded;
* :mod:`.mapping` turns those records into contract-v1 events (pure, no I/O);
* :mod:`.window` orders each session's events, drops duplicates and assigns
  ``seq`` (pure: the clock is an argument);
* :mod:`.bridge` is the consumer-group job behind ``streamguard bridge``, and
  :mod:`.receiver` its OTLP/HTTP endpoint.

``docs/otel.md`` documents the mapping attribute by attribute.
"""
