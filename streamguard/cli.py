"""The ``streamguard`` command line.

Exit codes (every command):

* 0: success (``tail`` also exits 0 on Ctrl-C);
* 1: a runtime failure: unreadable input, Kafka cluster unreachable, a topic
  that does not exist, events the cluster did not acknowledge. The message is
  one sentence on stderr;
* 2: a usage or configuration error (the message names the flag and its
  environment variable).

Operator commands add:

* 3: rejected: ``reset --wait`` got a refusal from the processor;
  ``emit`` skipped invalid lines (the valid ones were published; ``emit
  --check`` publishes nothing); ``replay`` skipped malformed lines (the valid
  ones were replayed);
* 4: ``reset --wait`` saw no acknowledgement before ``--timeout`` (the reset
  was sent, and will be applied when a processor consumes it);
* 5: ``reset``: sent (and accepted), but the session stays halted by another
  guardrail;
* 6: ``reset``, ``session``: no such session on the changelog (``reset``
  sends nothing unless ``--force``);
* 130: ``reset``, ``emit`` or ``replay`` interrupted by Ctrl-C.

``run`` exits 0 after a clean shutdown (SIGTERM, SIGINT), 1 when it cannot
start (a cluster it cannot reach, missing or mismatched topics, a metrics port
in use) or fails while running, 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any

from . import __version__
from .policy import PolicyError, load_policy_set

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2
EXIT_REJECTED, EXIT_NO_ACK, EXIT_INTERRUPTED = 3, 4, 130
EXIT_STILL_HALTED, EXIT_NO_SESSION = 5, 6
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
LOOKUP_PATIENCE_S = 3.0  # how long `reset` looks for a session on the changelog


def _policy_path(command: str, given: str | None) -> str | None:
    """``--policy`` or else ``STREAMGUARD_POLICY`` (said on stderr: nothing chosen silently)."""
    import os

    if given is not None:
        return given
    from_env = os.environ.get("STREAMGUARD_POLICY", "").strip()
    if from_env:
        print(f"streamguard {command}: policy {from_env} (from STREAMGUARD_POLICY)", file=sys.stderr)
        return from_env
    return None


def _expand_inputs(command: str, patterns: Sequence[str]) -> list[str]:
    """Files named or matched by glob patterns (``-`` is stdin), in order, each once.

    A pattern is expanded here too, for shells that pass it on unexpanded (or
    quoted ones); one that matches nothing is an error, not an empty input.
    """
    import glob
    import os

    paths: list[str] = []
    for pattern in patterns:
        if pattern == "-" or os.path.exists(pattern) or not glob.has_magic(pattern):
            matches = [pattern]
        else:
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise _CommandError(f"no file matches {pattern!r}")
        for path in matches:
            if path not in paths or path == "-":
                paths.append(path)
    if paths.count("-") > 1:
        raise _CommandError("stdin (-) can be read only once", EXIT_CONFIG)
    return paths


class _Progress:
    """A one-line progress report on stderr, rewritten in place, only on a terminal."""

    def __init__(self, command: str, total_bytes: int | None = None, every_s: float = 0.5) -> None:
        self.command = command
        self.total = total_bytes
        self.every = every_s
        self.enabled = sys.stderr.isatty()
        self.next_at = time.monotonic() + every_s
        self.shown = False

    def update(self, text: str, done_bytes: int | None = None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + self.every
        share = ""
        if self.total and done_bytes is not None:
            share = f"{min(100.0, 100.0 * done_bytes / self.total):5.1f}% "
        sys.stderr.write(f"\r\x1b[Kstreamguard {self.command}: {share}{text}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


class _CountingReader:
    """Lines of a binary file; every few thousand, the progress line is updated."""

    def __init__(self, handle: Any, progress: _Progress, shared: dict[str, int]) -> None:
        self.handle = handle
        self.progress = progress
        self.shared = shared  # bytes and lines read over every input

    def __iter__(self) -> Any:
        shared, enabled = self.shared, self.progress.enabled
        for line in self.handle:
            if enabled:
                shared["bytes"] += len(line)
                shared["lines"] += 1
                if shared["lines"] % 2048 == 0:
                    self.progress.update(f"{shared['lines']:,} lines", shared["bytes"])
            yield line


TAIL_CLOCK_SKEW_MS = 2000
"""How far a producer's clock may run behind tail's for a record written as tail
started to count as written after it."""
SUMMARY_HALTED_LISTED = 100  # halted session names in a replay summary (all are counted)


def _cmd_replay(args: argparse.Namespace) -> int:
    import os

    from .engine import Engine
    from .events import encode
    from .replay import ReplayReport, halted_sessions, halted_total, replay_sources

    policies = load_policy_set(_policy_path("replay", args.policy))
    _warn_policy(policies, "replay")
    engine = Engine(policies)
    report = ReplayReport()
    import_failures: list[str] = []
    try:
        paths = _expand_inputs("replay", args.files or ["-"])
    except _CommandError as exc:
        print(f"streamguard replay: {exc}", file=sys.stderr)
        return exc.code
    opened: list[Any] = []
    readers: list[tuple[str, _CountingReader]] = []
    total = 0 if args.from_format else sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    progress = _Progress("replay", total or None)
    shared = {"bytes": 0, "lines": 0}
    try:
        if args.from_format:
            handle = _imported_source("replay", args.from_format, paths, import_failures)
            opened.append(handle)
            readers.append(("", _CountingReader(handle, progress, shared)))
        else:
            for path in paths:
                if path == "-":
                    if sys.stdin.isatty():
                        print(
                            "streamguard replay: reading events from the terminal; paste JSONL and "
                            "end with Ctrl-D, or give a FILE",
                            file=sys.stderr,
                        )
                    handle = sys.stdin.buffer
                else:
                    handle = open(path, "rb")  # noqa: SIM115
                    opened.append(handle)
                name = "" if len(paths) == 1 else ("stdin" if path == "-" else path)
                readers.append((name, _CountingReader(handle, progress, shared)))
    except OSError as exc:
        for handle in opened:
            handle.close()
        print(f"streamguard replay: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    except _CommandError as exc:
        print(f"streamguard replay: {exc}", file=sys.stderr)
        return exc.code
    out = sys.stdout.buffer
    line_format = args.format == "line"
    interrupted = False
    try:
        for output in replay_sources(readers, engine, errors=_ProgressAware(progress), report=report):
            if line_format:
                out.write(format_output(output).encode() + b"\n")
            else:
                out.write(encode(output))
                out.write(b"\n")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        progress.clear()
        for handle in opened:
            handle.close()
    with contextlib.suppress(BrokenPipeError):
        out.flush()
    if args.summary:
        summary = {
            "lines": report.lines,
            "events": report.events,
            "controls": report.controls,
            "outputs": report.outputs,
            "alerts_by_signal": dict(sorted(report.alerts_by_signal.items())),
            "trips_by_signal": dict(sorted(report.trips_by_signal.items())),
            "feedback": report.feedback,
            "malformed": report.malformed,
            "unknown_types": report.unknown_types,
            "replays_skipped": report.replays_skipped,
            "seq_jumps": report.seq_jumps,
            "failed": report.failed,
            "evicted": report.evicted,
            "sessions": len(engine.sessions),
            "halted_total": halted_total(engine, report),
            "halted_sessions": halted_sessions(engine, report, SUMMARY_HALTED_LISTED),
            "halted_evicted": report.halted_evicted,
            "interrupted": interrupted,
        }
        if args.summary_format == "text":
            print(_summary_text(summary), file=sys.stderr)
        else:
            print(json.dumps(summary, sort_keys=True), file=sys.stderr)
    if interrupted:
        print(
            f"streamguard replay: interrupted after {report.lines:,} lines ({report.outputs:,} outputs)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if import_failures:
        return EXIT_FAILURE
    if report.malformed or report.failed:
        # As `emit`: the valid lines were replayed, but the input was not clean.
        return EXIT_REJECTED
    return EXIT_OK


class _ProgressAware:
    """stderr for replay's messages: clears the progress line before each one."""

    def __init__(self, progress: _Progress) -> None:
        self.progress = progress

    def write(self, text: str) -> int:
        self.progress.clear()
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _summary_text(summary: dict[str, Any]) -> str:
    """The ``--summary-format text`` block: counts first, then what tripped, then who is halted."""
    lines = [
        f"replayed {summary['lines']:,} lines: {summary['events']:,} events, "
        f"{summary['controls']:,} controls, {summary['sessions']:,} sessions held at the end",
    ]
    bad = [
        f"{summary[k]:,} {label}"
        for k, label in (
            ("malformed", "malformed"),
            ("unknown_types", "of unknown type"),
            ("failed", "failed"),
            ("replays_skipped", "skipped as replays (seq not newer)"),
            ("seq_jumps", "with a seq jump"),
        )
        if summary[k]
    ]
    if bad:
        lines.append("lines: " + ", ".join(bad))
    if summary["alerts_by_signal"]:
        lines.append("alerts by signal:")
        lines += [f"  {n:>8,}  {sig}" for sig, n in summary["alerts_by_signal"].items()]
    if summary["trips_by_signal"]:
        lines.append("trips by guardrail/signal:")
        lines += [f"  {n:>8,}  {sig}" for sig, n in summary["trips_by_signal"].items()]
    if summary["feedback"]:
        lines.append(f"feedback blocks: {summary['feedback']:,}")
    halted, total = summary["halted_sessions"], summary["halted_total"]
    if total:
        more = f" (first {len(halted)} listed)" if total > len(halted) else ""
        lines.append(f"halted at the end: {total:,} session(s){more}")
        lines += [f"  {name}" for name in halted]
    else:
        lines.append("halted at the end: none")
    if summary["interrupted"]:
        lines.append("(interrupted: the counts cover the lines read so far)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- import
#
# `import` converts recorded sessions of other agent harnesses to contract-v1
# JSONL; `replay --from` and `emit --from` run the same conversion and feed
# its lines to their usual path. A file that fails is reported (file and
# record) and the others go on; the command then exits 1.


def _imported_lines(command: str, from_format: str, paths: Sequence[str], failures: list[str]) -> Any:
    """Contract-v1 lines (bytes, no newline) of every session in ``paths``."""
    from .importers import FORMATS, encode_session, iter_sessions

    if from_format != "auto" and from_format not in FORMATS:  # argparse checks; library callers too
        raise _CommandError(f"unknown format {from_format!r}", EXIT_CONFIG)
    if any(path in (None, "-") for path in paths):
        raise _CommandError("--from reads files or folders, not stdin", EXIT_CONFIG)

    def failed(failure: Any) -> None:
        failures.append(str(failure))
        print(f"streamguard {command}: {failure}", file=sys.stderr)

    fmt = None if from_format == "auto" else from_format
    for session in iter_sessions(fmt, paths, on_error=failed):
        yield from encode_session(session)


def _imported_source(command: str, from_format: str, paths: Sequence[str], failures: list[str]) -> Any:
    """A binary file object over the imported lines (``emit`` and ``replay`` read a file)."""
    import io

    return io.BytesIO(b"".join(line + b"\n" for line in _imported_lines(command, from_format, paths, failures)))


def _cmd_import(args: argparse.Namespace) -> int:
    failures: list[str] = []
    sessions_seen: set[bytes] = set()
    events = 0
    try:
        out = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115
    except OSError as exc:
        print(f"streamguard import: cannot write {args.output}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        from .importers import encode_session, iter_sessions

        def failed(failure: Any) -> None:
            failures.append(str(failure))
            print(f"streamguard import: {failure}", file=sys.stderr)

        fmt = None if args.from_format == "auto" else args.from_format
        for session in iter_sessions(fmt, args.paths, on_error=failed):
            sessions_seen.add(session.session.encode())
            for line in encode_session(session):
                out.write(line)
                out.write(b"\n")
                events += 1
        out.flush()
    finally:
        if args.output:
            out.close()
    print(
        f"streamguard import: {len(sessions_seen)} session(s), {events} event(s)"
        + (f"; {len(failures)} file(s) failed" if failures else ""),
        file=sys.stderr,
    )
    return EXIT_FAILURE if failures else EXIT_OK


def policy_warnings(policies: Any) -> list[str]:
    """Settings that load but cannot do what they say (the policy itself stays valid)."""
    warnings: list[str] = []
    for where, policy in [("", policies.base)] + [
        (f"agents[{i}] (match {pattern!r}): ", policy) for i, (pattern, policy) in enumerate(policies.overrides)
    ]:
        cost = getattr(policy, "cost_ceiling", None)
        turn = getattr(cost, "max_turn_usd", 0.0) or 0.0
        session = getattr(cost, "max_session_usd", 0.0) or 0.0
        if turn > 0 and session > 0 and turn > session:
            warnings.append(
                f"{where}`cost_ceiling.max_turn_usd` ({turn:g}) is above `cost_ceiling.max_session_usd` "
                f"({session:g}): the session bound trips first, the turn bound never does"
            )
    return warnings


def _warn_policy(policies: Any, command: str) -> None:
    for warning in policy_warnings(policies):
        print(f"streamguard {command}: warning: {policies.source}: {warning}", file=sys.stderr)


def _policy_keys() -> dict[str, Any]:
    """Every key of the default policy, as nested dicts (leaves: their default values)."""
    import msgspec

    from .policy import Policy

    return msgspec.to_builtins(Policy())


def policy_hint(message: str) -> str:
    """What a policy error message leaves out: the nearest known key for an unknown one,
    the allowed values of an enum."""
    import difflib
    import re

    where = re.search(r"`([^`]*)`: ", message)
    path = where.group(1) if where else ""
    path = re.sub(r"^agents\[\d+\]\.?", "", path)  # an override has the base's keys
    unknown = re.search(r"unknown field `([^`]+)`", message)
    if unknown:
        table: Any = _policy_keys()
        for part in filter(None, path.split(".")):
            table = table.get(part, {}) if isinstance(table, dict) else {}
        known = list(table) if isinstance(table, dict) else []
        if not path:
            known.append("agents")
        near = difflib.get_close_matches(unknown.group(1), known, n=1, cutoff=0.6)
        return f"; did you mean `{near[0]}`?" if near else (f"; known keys: {', '.join(sorted(known))}" if known else "")
    if "Invalid enum value" in message and path.split(".")[-1] == "mode":
        from .policy import MODES

        return f"; expected one of {', '.join(MODES)}"
    return ""


def _render_with_overrides(path: str, policies: Any) -> str:
    """``check-config --defaults FILE``: the effective base policy, then the file's
    ``[[agents]]`` overrides as written (each is merged onto the base at load)."""
    import tomllib

    import msgspec

    from .policy import render_policy

    text = render_policy(policies.base)
    from .policy import _emit_table

    if policies.fleet:
        lines: list[str] = []
        for rule in msgspec.to_builtins(policies.fleet):
            limits = rule.pop("limits")
            _emit_table(lines, [], {"fleet": [rule]})
            for limit in limits:
                lines.append("")
                lines.append("[[fleet.limits]]")
                lines += [f"{k} = {msgspec.json.encode(v).decode()}" for k, v in limit.items()]
        text += (
            "\n# [[fleet]] rules, with every default: each scope (one agent, or one tenant) has "
            "its own rolling windows (docs/fleet.md).\n" + "\n".join(lines).lstrip("\n") + "\n"
        )
    if not policies.overrides:
        return text
    with open(path, "rb") as handle:
        raw = tomllib.load(handle)

    lines = []
    _emit_table(lines, [], {"agents": raw.get("agents", [])})
    header = (
        "\n# [[agents]] overrides, as written in the file: each is merged key by key onto the "
        "policy above\n# for the agents its `match` glob selects (first match wins).\n"
    )
    return text + header + "\n".join(lines).lstrip("\n") + "\n"


def _cmd_check_config(args: argparse.Namespace) -> int:
    if args.defaults:
        from .policy import render_policy

        if args.file is None:
            sys.stdout.write(render_policy(None))
            return EXIT_OK
        policies = load_policy_set(args.file)
        _warn_policy(policies, "check-config")
        sys.stdout.write(_render_with_overrides(args.file, policies))
        return EXIT_OK
    if args.file is None:
        print("streamguard check-config: a policy FILE is required (or --defaults)", file=sys.stderr)
        return EXIT_CONFIG
    policies = load_policy_set(args.file)
    from .watchdog import Watchdog

    base = Watchdog(policies.base)
    info: dict[str, Any] = {
        "file": args.file,
        "mode": policies.base.mode,
        "signals": [s.id for s in base.signals],
        "agent_overrides": [pattern for pattern, _ in policies.overrides],
        "fleet_rules": [
            {
                "name": rule.name,
                "by": rule.by,
                "match": rule.match,
                "window_s": rule.window_s,
                "cooldown_s": rule.cooldown_s,
                "limits": [f"{limit.metric} > {limit.above:g} -> {limit.action}" for limit in rule.limits],
            }
            for rule in policies.fleet
        ],
        "warnings": policy_warnings(policies),
    }
    if args.json:
        print(json.dumps(info, sort_keys=True))
    else:
        print(f"{args.file}: ok" + (f" ({len(info['warnings'])} warning(s))" if info["warnings"] else ""))
        print(f"  mode: {info['mode']}")
        print(f"  signals: {', '.join(info['signals']) or '(none)'}")
        for pattern in info["agent_overrides"]:
            print(f"  override for agents matching {pattern!r}")
        for rule in info["fleet_rules"]:
            print(
                f"  fleet rule {rule['name']!r}: one scope per {rule['by']} (agents matching "
                f"{rule['match']!r}), {rule['window_s']:g} s window: {'; '.join(rule['limits'])}"
            )
        for warning in info["warnings"]:
            print(f"  warning: {warning}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from .events import json_schemas

    schemas = json_schemas()
    for family in ("agent_event", "control_event", "output_event"):
        # msgspec writes JSON Schema 2020-12; validators pick their dialect from `$schema`.
        schemas[family] = {"$schema": JSON_SCHEMA_DIALECT, **schemas[family]}
    if args.family != "all":
        schemas = schemas[f"{args.family}_event"]
    print(json.dumps(schemas, indent=2, sort_keys=True))
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        from .kafka.config import ConfigError, ProcessorConfig
        from .kafka.processor import run_processor
    except ImportError as exc:  # pragma: no cover - packaging problem
        print(f"streamguard run: the Kafka processor is unavailable: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    import anyio

    from . import logsetup

    try:
        config = ProcessorConfig.from_args(list(argv))
    except ConfigError as exc:
        print(f"streamguard run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logsetup.configure(
        config.log_level,
        config.log_format,
        kafka_hint=f"is the Kafka cluster at {config.bootstrap_servers} reachable?",
    )
    for warning in unknown_environment():
        print(f"streamguard run: warning: {warning}", file=sys.stderr)
    if config.policy is not None:
        _warn_policy(load_policy_set(config.policy), "run")
    try:
        anyio.run(run_processor, config)
    except OSError as exc:
        print(f"streamguard run: cannot start: {_startup_reason(exc, config)}", file=sys.stderr)
        return EXIT_FAILURE
    except TimeoutError as exc:
        print(f"streamguard run: timed out: {exc or 'a Kafka request did not complete'} "
              f"(cluster {config.bootstrap_servers}, request timeout {config.request_timeout_ms} ms)",
              file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _startup_reason(exc: OSError, config: Any) -> str:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (
            f"the metrics port {config.metrics_host}:{config.metrics_port} is in use (another "
            "`streamguard run` or `demo`?); pick another with --metrics-port / STREAMGUARD_METRICS_PORT"
        )
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
        return (
            f"cannot listen on {config.metrics_host}:{config.metrics_port} for metrics "
            f"({exc.strerror}); check --metrics-host / --metrics-port"
        )
    return f"{exc.strerror or exc} ({type(exc).__name__})"


_OTHER_ENVIRONMENT = ("STREAMGUARD_BROKER_BIN", "STREAMGUARD_BRIDGE_")


def unknown_environment(env: Any = None) -> list[str]:
    """``STREAMGUARD_*`` variables that look like a misspelt setting (they are ignored)."""
    import difflib
    import os

    from .kafka.config import ProcessorConfig

    env = os.environ if env is None else env
    known = [ProcessorConfig.env_name(name) for name in ProcessorConfig.__struct_fields__]
    found = []
    for name in sorted(env):
        if not name.startswith("STREAMGUARD_") or name in known or name.startswith(_OTHER_ENVIRONMENT):
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
        if near:
            found.append(f"{name} is not a setting and is ignored; did you mean {near[0]}?")
    return found


# --------------------------------------------------------------------------- operator commands
#
# `tail`, `reset` and `emit` talk to a running cluster. They share the
# connection settings of `streamguard run` (same flags, same STREAMGUARD_*
# environment variables), turn every Kafka failure into one sentence on
# stderr, and exit with the codes listed in the module docstring.

_CONNECTION_FIELDS = (
    "bootstrap_servers",
    "client_id",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_key_password",
    "ssl_check_hostname",
    "sasl_oauth_token_provider",
    "request_timeout_ms",
    "compression_type",
    "client_properties",
)
_OUTPUT_TYPES = ("alert", "guardrail_trip", "feedback", "guardrail_reset")
_REASON_WIDTH = 300


class _CommandError(Exception):
    """A failure reported as one sentence, with its exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def _add_kafka_args(parser: argparse.ArgumentParser, topics: Sequence[str]) -> None:
    from .kafka.config import ProcessorConfig

    defaults = ProcessorConfig()
    group = parser.add_argument_group(
        "Kafka", "connection and topics; each flag also reads STREAMGUARD_<NAME> (flags win)"
    )
    for name in (*_CONNECTION_FIELDS, *topics):
        default = getattr(defaults, name)
        help_text = ProcessorConfig.HELP.get(name, "") + f" [env {ProcessorConfig.env_name(name)}"
        if name not in ("sasl_password", "ssl_key_password"):
            help_text += f"; default {default}"
        help_text += "]"
        if isinstance(default, bool):
            group.add_argument(
                ProcessorConfig.flag(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            group.add_argument(ProcessorConfig.flag(name), dest=name, default=None, help=help_text)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also show the Kafka client's own log messages"
    )


def _kafka_config(args: argparse.Namespace, topics: Sequence[str], settings: Any = None) -> Any:
    """Connection and topic settings from flags over environment over defaults, as
    ``settings`` reads them (default: ``streamguard run``'s, STREAMGUARD_*)."""
    import os

    from .kafka.config import ProcessorConfig

    cls = ProcessorConfig if settings is None else settings
    names = (*_CONNECTION_FIELDS, *topics)
    given = argparse.Namespace(**{name: getattr(args, name, None) for name in names})
    env = {}
    for name in names:
        value = os.environ.get(cls.env_name(name))
        if value is not None:
            env[cls.env_name(name)] = value
    return cls.from_namespace(given, env)


def _kafka_reason(exc: BaseException) -> str:
    from aiokafka.errors import KafkaConnectionError

    if isinstance(exc, KafkaConnectionError):
        return "no broker answered"
    name, text = type(exc).__name__, str(exc).strip()
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


async def _start_client(client: Any, config: Any) -> None:
    """Start an aiokafka client; an unreachable cluster becomes a :class:`_CommandError`."""
    from aiokafka.errors import KafkaError

    try:
        await client.start()
    except (KafkaError, OSError, TimeoutError) as exc:
        with contextlib.suppress(Exception):
            # an admin client closes; consumers and producers stop
            await (client.stop() if hasattr(client, "stop") else client.close())
        raise _CommandError(
            f"cannot reach the Kafka cluster at {config.bootstrap_servers} ({_kafka_reason(exc)})"
        ) from None


async def _require_topic(client: Any, topic: str, config: Any, flag: str) -> set[int]:
    """The partitions of ``topic``; a missing topic becomes a :class:`_CommandError`."""
    if hasattr(client, "topics"):  # a consumer
        names = await client.topics()
        partitions = client.partitions_for_topic(topic) if topic in names else None
    else:  # a producer
        cluster = await client.client.fetch_all_metadata()
        partitions = cluster.partitions_for_topic(topic)
    if not partitions:
        raise _CommandError(
            f"topic {topic!r} does not exist on {config.bootstrap_servers} (create it, run "
            f"`streamguard run --create-topics`, or point {flag} at the right topic)"
        )
    return set(partitions)


def _run_kafka_command(
    command: str, args: argparse.Namespace, topics: Sequence[str], body: Any, settings: Any = None
) -> int:
    """Run ``body(config)`` on an event loop; map failures and Ctrl-C to exit codes."""
    import asyncio
    import logging

    from .kafka.config import ConfigError

    try:
        config = _kafka_config(args, topics, settings)
    except ConfigError as exc:
        print(f"streamguard {command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if not args.verbose:
        # aiokafka logs every failed connection attempt; the command reports
        # the failure itself, in one sentence.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    from aiokafka.errors import KafkaError

    try:
        return asyncio.run(body(config))
    except KeyboardInterrupt:
        return EXIT_OK if command == "tail" else EXIT_INTERRUPTED
    except _CommandError as exc:
        print(f"streamguard {command}: {exc}", file=sys.stderr)
        return exc.code
    except (KafkaError, OSError) as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        print(
            f"streamguard {command}: Kafka request failed against {config.bootstrap_servers} "
            f"({_kafka_reason(exc)})",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _one_line(text: str | None, width: int = _REASON_WIDTH) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _timestamp(ts: float | None) -> str:
    if ts is None:
        return "-"
    seconds = int(ts)
    millis = round((ts - seconds) * 1000)
    if millis == 1000:
        seconds, millis = seconds + 1, 0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def format_output(output: Any, record_ts: float | None = None) -> str:
    """One human-readable line for an output event (``streamguard tail``)."""
    from .events import Alert, Feedback, GuardrailReset, GuardrailTrip

    when = _timestamp(output.ts if output.ts is not None else record_ts)
    who = output.session + (f" ({output.agent})" if output.agent else "")
    seq = f" seq={output.seq}" if output.seq is not None else ""
    if isinstance(output, Alert):
        return (
            f"{when} ALERT    {who} {output.signal} {output.severity}/{output.scope}{seq}: "
            f"{_one_line(output.reason)}"
        )
    if isinstance(output, GuardrailTrip):
        if output.session_halted:
            action = "halt session"
        elif output.halted_turn:
            action = "cut turn"
        else:
            action = "no action"
        return (
            f"{when} TRIP     {who} {output.guardrail}/{output.signal} -> {action}{seq}: "
            f"{_one_line(output.reason)}"
        )
    if isinstance(output, Feedback):
        return f"{when} FEEDBACK {who} {','.join(output.signals)}: {_one_line(output.text)}"
    if isinstance(output, GuardrailReset):
        verdict = "accepted" if output.accepted else "refused"
        by = f" by {output.by}" if output.by else ""
        still = (
            f" (still halted by {', '.join(output.still_halted_by)})" if output.still_halted_by else ""
        )
        return f"{when} RESET    {who} {output.guardrail} {verdict}{by}{still}: {_one_line(output.reason)}"
    return f"{when} {type(output).__name__.upper():<8} {who}"  # pragma: no cover - future types


def clearing_commands(session: str, halted_by: Iterable[str], fleet_scope: str | None) -> list[str]:
    """The commands that lift a session's halts: one reset for its own guardrails (``all``
    for several), and for a fleet halt the close of its scope's circuit (a session reset
    never lifts that one)."""
    own = [g for g in halted_by if g != "fleet"]
    commands = []
    if own:
        commands.append(f"streamguard reset {session} --guardrail {own[0] if len(own) == 1 else 'all'}")
    if "fleet" in halted_by:
        commands.append(
            f"streamguard reset --scope {fleet_scope}" if fleet_scope
            else "streamguard fleet --open (close its scope's circuit: streamguard reset --scope SCOPE)"
        )
    return commands


class Pacer:
    """At most ``rate`` sends a second: :meth:`delay` is how long to wait before the next.
    Time spent waiting on the input is no credit: a backlog after a quiet pipe goes out
    at the rate too, not at once."""

    def __init__(self, rate: float) -> None:
        self.interval = 1 / rate
        self.next_at: float | None = None

    def delay(self, now: float) -> float:
        """The wait before a send wanted at ``now``; the send is then counted."""
        at = now if self.next_at is None or self.next_at < now else self.next_at
        self.next_at = at + self.interval
        return at - now


def written_before_tail(record: Any, listed: int, floor: int, started_ms: float) -> bool:
    """Whether ``tail`` (from the end) skips ``record``: below the end the broker listed,
    or below the end its first fetch saw (``floor``) and stamped before tail started
    (``started_ms``, its clock less the skew allowed)."""
    offset = record.offset
    return offset < listed or (offset < floor and record.timestamp < started_ms)


def _cmd_tail(args: argparse.Namespace) -> int:
    if args.max_events is not None and args.max_events < 1:
        print("streamguard tail: --max-events must be at least 1", file=sys.stderr)
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        import msgspec
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from .client import Filter, header_decision, select_record

        topic = config.alerts_topic
        consumer = AIOKafkaConsumer(
            **config.consumer_options(),
            enable_auto_commit=False,
            auto_offset_reset="earliest" if args.from_beginning else "latest",
        )
        await _start_client(consumer, config)
        try:
            partitions = await _require_topic(consumer, topic, config, "--alerts-topic")
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            floors: dict[Any, int] = {}
            listed: dict[Any, int] = {}
            started_ms = 0.0
            if args.from_beginning:
                await consumer.seek_to_beginning(*tps)
            else:
                await consumer.seek_to_end(*tps)
                # Some brokers (Tansu 0.6, the bundled one) answer "latest" with the base
                # offset of the last batch plus one, so the end of a multi-record batch
                # would be printed again. As the restore path does, the high watermark
                # of the first fetch response is taken as the real end, for records
                # written before tail started only: one written after it, before that
                # first response, is above the answer too, and is shown.
                listed = {tp: await consumer.position(tp) for tp in tps}
                started_ms = time.time() * 1000 - TAIL_CLOCK_SKEW_MS
            criteria = (args.type, args.signal, args.guardrail)
            filters = (Filter(*criteria),) if any(c is not None for c in criteria) else ()
            sessions = {s.encode() for s in args.session} if args.session else None
            out = sys.stdout
            shown = 0
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for tp in listed:
                    if tp not in floors and (high := consumer.highwater(tp)) is not None:
                        floors[tp] = max(high, listed[tp])
                for tp, records in batch.items():
                    floor = floors.get(tp, listed.get(tp, 0))
                    for record in records:
                        if written_before_tail(record, listed.get(tp, 0), floor, started_ms):
                            continue  # older than tail's start (see above)
                        if sessions is not None and record.key not in sessions:
                            continue
                        if args.json and header_decision(record, filters):
                            line = record.value.decode("utf-8", "replace")
                        else:
                            try:
                                selected, output = select_record(record, filters)
                            except msgspec.DecodeError as exc:
                                print(
                                    f"streamguard tail: skipping an undecodable record at "
                                    f"{record.topic}[{record.partition}]@{record.offset}: {exc}",
                                    file=sys.stderr,
                                )
                                continue
                            if not selected or output is None:
                                continue
                            if args.json:
                                line = record.value.decode("utf-8", "replace")
                            else:
                                line = format_output(output, record.timestamp / 1000.0)
                        out.write(line + "\n")
                        shown += 1
                        if args.max_events is not None and shown >= args.max_events:
                            out.flush()
                            return EXIT_OK
                out.flush()
        finally:
            await consumer.stop()

    return _run_kafka_command("tail", args, ("alerts_topic",), body)


def _cmd_reset(args: argparse.Namespace) -> int:
    """``streamguard reset``: the changelog look-up and the exit codes around
    :class:`~streamguard.client.AsyncSessionControl`, which sends and confirms."""
    import getpass

    from .client import InvalidReset, make_reset
    from .events import MAX_USD

    if args.scope is not None:
        if args.session is not None or args.guardrail is not None or args.add_budget is not None:
            print("streamguard reset: --scope closes a fleet circuit; it takes no SESSION, "
                  "--guardrail or --add-budget", file=sys.stderr)
            return EXIT_CONFIG
        return _cmd_reset_scope(args)
    if args.session is None or args.guardrail is None:
        print("streamguard reset: SESSION and --guardrail are required (or --scope SCOPE)", file=sys.stderr)
        return EXIT_CONFIG

    if args.add_budget is not None:
        if not 0 < args.add_budget <= MAX_USD:  # NaN and infinity too: they encode as null
            print(
                f"streamguard reset: --add-budget must be a positive amount of USD, at most {MAX_USD:g}",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        if args.guardrail == "watchdog":
            print(
                "streamguard reset: --add-budget raises the cost ceiling; use it with "
                "--guardrail cost_ceiling or all",
                file=sys.stderr,
            )
            return EXIT_CONFIG
    if not 0 < args.timeout < float("inf"):  # NaN too: a wait that never ends
        print("streamguard reset: --timeout must be a positive number of seconds", file=sys.stderr)
        return EXIT_CONFIG
    by = args.by
    if by is None:
        with contextlib.suppress(Exception):
            by = getpass.getuser()
    try:
        event = make_reset(args.session, args.guardrail, add_budget_usd=args.add_budget, by=by or None)
    except InvalidReset as exc:
        print(f"streamguard reset: invalid reset: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        import asyncio

        from aiokafka.errors import KafkaError

        from .client import AsyncSessionControl, ResetTimedOut, TopicNotFound

        remains: list[str] = []  # guardrails the session stays halted by, as its snapshot says
        fleet_scope: str | None = None
        if not args.force:
            view = await _lookup_session(config, event.session)
            # A session halted a moment ago is on the changelog at the next
            # checkpoint (1 s by default): look again for a little while.
            deadline = time.monotonic() + LOOKUP_PATIENCE_S
            while view is None and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                view = await _lookup_session(config, event.session)
            if view is None:
                raise _CommandError(
                    f"no session {event.session!r} on {config.changelog_topic} after "
                    f"{LOOKUP_PATIENCE_S:g} s: never seen, evicted, or not checkpointed (is "
                    "`streamguard run` running?); nothing was sent (--force sends the reset anyway)",
                    EXIT_NO_SESSION,
                )
            targets = {"watchdog", "cost_ceiling"} if event.guardrail == "all" else {event.guardrail}
            remains = [g for g in view.halted_by if g not in targets]
            fleet_scope = view.fleet_scope
            if not view.halted:
                print(
                    f"streamguard reset: session {event.session!r} is not halted; the reset "
                    "still clears its detectors' counts",
                    file=sys.stderr,
                )
        control = AsyncSessionControl(
            config.bootstrap_servers,
            control_topic=config.control_topic,
            alerts_topic=config.alerts_topic,
            confirm=args.wait,
            producer_options=config.producer_options(),
            consumer_options=config.consumer_options(),
        )
        try:
            try:
                await control.start()
            except TopicNotFound as exc:
                flag = "--alerts-topic" if exc.role == "alerts" else "--control-topic"
                raise _CommandError(
                    f"topic {exc.topic!r} does not exist on {config.bootstrap_servers} (create it, run "
                    f"`streamguard run --create-topics`, or point {flag} at the right topic)"
                ) from None
            except (KafkaError, OSError, TimeoutError) as exc:
                raise _CommandError(
                    f"cannot reach the Kafka cluster at {config.bootstrap_servers} ({_kafka_reason(exc)})"
                ) from None
            if not args.wait:
                sent = await control.publish(event)
                print(_reset_sent_line(sent, config))
                if remains:
                    print(
                        f"streamguard reset: session {event.session!r} stays halted by "
                        f"{', '.join(remains)} (its last snapshot); to clear it: "
                        + "; ".join(clearing_commands(event.session, remains, fleet_scope)),
                        file=sys.stderr,
                    )
                    return EXIT_STILL_HALTED
                return EXIT_OK
            pending = await control.request(event)
            print(f"{_reset_sent_line(pending.sent, config)}; waiting for the acknowledgement", file=sys.stderr)
            outcome = await pending.wait(args.timeout)
            if isinstance(outcome, ResetTimedOut):
                raise _CommandError(
                    f"no acknowledgement on {config.alerts_topic} within {args.timeout:g} s; is "
                    f"`streamguard run` running and consuming {config.control_topic}? (the reset "
                    "was sent and will be applied when it is)",
                    EXIT_NO_ACK,
                )
            if args.json:
                print(outcome.value.decode("utf-8", "replace"))
            else:
                print(format_output(outcome.confirmation, outcome.record_ts))
            if not outcome.accepted:
                return EXIT_REJECTED
            if outcome.still_halted_by:
                print(
                    f"streamguard reset: accepted, but session {event.session!r} "
                    f"stays halted by {', '.join(outcome.still_halted_by)}; to clear it: "
                    + "; ".join(clearing_commands(event.session, outcome.still_halted_by, fleet_scope)),
                    file=sys.stderr,
                )
                return EXIT_STILL_HALTED
            return EXIT_OK
        finally:
            await control.close()

    return _run_kafka_command("reset", args, ("control_topic", "alerts_topic", "changelog_topic"), body)


def _reset_sent_line(sent: Any, config: Any) -> str:
    return (
        f"reset of {sent.reset.guardrail} for session {sent.reset.session!r} sent to "
        f"{config.control_topic} (partition {sent.partition}, offset {sent.offset})"
    )


def _cmd_reset_scope(args: argparse.Namespace) -> int:
    """``reset --scope``: close a fleet circuit through the control topic."""
    import getpass

    import msgspec

    from .events import ScopeReset, control_decoder, encode
    from .fleet_windows import decode_circuit, parse_scope

    if parse_scope(args.scope) is None:
        print(f"streamguard reset: {args.scope!r} is not a scope: rule:agent=NAME or rule:tenant=NAME",
              file=sys.stderr)
        return EXIT_CONFIG
    if not 0 < args.timeout < float("inf"):  # NaN too: a wait that never ends
        print("streamguard reset: --timeout must be a positive number of seconds", file=sys.stderr)
        return EXIT_CONFIG
    by = args.by
    if by is None:
        with contextlib.suppress(Exception):
            by = getpass.getuser()
    event = ScopeReset(scope=args.scope, by=by or None, ts=round(time.time(), 6))
    try:
        payload = encode(event)
        control_decoder.decode(payload)
    except msgspec.ValidationError as exc:
        print(f"streamguard reset: invalid reset: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        key = event.scope.encode()
        consumer = None
        producer = AIOKafkaProducer(**config.producer_options(), acks="all", enable_idempotence=False)
        try:
            if args.wait:
                consumer = AIOKafkaConsumer(**config.consumer_options(), enable_auto_commit=False)
                await _start_client(consumer, config)
                partitions = await _require_topic(
                    consumer, config.fleet_circuits_topic, config, "--fleet-circuits-topic"
                )
                tps = [TopicPartition(config.fleet_circuits_topic, p) for p in sorted(partitions)]
                consumer.assign(tps)
                await consumer.seek_to_end(*tps)
                for tp in tps:
                    await consumer.position(tp)
            await _start_client(producer, config)
            await _require_topic(producer, config.control_topic, config, "--control-topic")
            meta = await producer.send_and_wait(config.control_topic, value=payload, key=key)
            sent = (
                f"close of the circuit of scope {event.scope!r} sent to {config.control_topic} "
                f"(partition {meta.partition}, offset {meta.offset})"
            )
            if consumer is None:
                print(sent)
                return EXIT_OK
            print(f"{sent}; waiting for the circuits topic", file=sys.stderr)
            deadline = time.monotonic() + args.timeout
            while (left := deadline - time.monotonic()) > 0:
                batch = await consumer.getmany(timeout_ms=int(min(left, 0.5) * 1000) + 1)
                for records in batch.values():
                    for record in records:
                        if record.key != key or record.value is None:
                            continue
                        with contextlib.suppress(msgspec.DecodeError, ValueError):
                            circuit = decode_circuit(record.value)
                            if circuit.state == "closed":
                                if args.json:
                                    print(record.value.decode("utf-8", "replace"))
                                else:
                                    print(f"circuit of scope {circuit.scope} closed: {circuit.reason}")
                                return EXIT_OK
            raise _CommandError(
                f"the circuit of {event.scope!r} was not reported closed on "
                f"{config.fleet_circuits_topic} within {args.timeout:g} s; is `streamguard run` "
                "running with a policy that has this scope's [[fleet]] rule? (the close was sent "
                "and will be applied when it is)",
                EXIT_NO_ACK,
            )
        finally:
            await producer.stop()
            if consumer is not None:
                await consumer.stop()

    return _run_kafka_command("reset", args, ("control_topic", "fleet_circuits_topic"), body)


def _fleet_line(view: Any) -> str:
    """One line of ``streamguard fleet``."""
    if view.circuit == "open":
        until = f"until {_timestamp(view.until)}" if view.until is not None else "until an operator closes it"
        state = f"OPEN since {_timestamp(view.opened_at)} {until} (generation {view.generation})"
    else:
        state = view.circuit
    totals = (
        f"spend {view.spend_usd:.2f} USD, {view.tokens} tokens, {view.sessions_started} started, "
        f"{view.sessions_tripped} tripped ({view.tripped_share:.0%}), {view.sessions_halted} halted"
    )
    line = f"{view.scope} {state}: {totals} (window to {_timestamp(view.watermark)})"
    if view.circuit == "open" and view.reason:
        line += f": {_one_line(view.reason, 200)}"
    return line


def _cmd_fleet(args: argparse.Namespace) -> int:
    async def body(config: Any) -> int:
        import msgspec
        from aiokafka import AIOKafkaConsumer

        from .kafka.fleet_inspect import read_scopes

        consumer = AIOKafkaConsumer(
            **config.consumer_options(), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await _start_client(consumer, config)

        def unreadable(topic: str, partition: int, offset: int, reason: str) -> None:
            print(f"streamguard fleet: skipping an unreadable record at {topic}[{partition}]@{offset}: "
                  f"{reason}", file=sys.stderr)

        try:
            await _require_topic(consumer, config.fleet_state_topic, config, "--fleet-state-topic")
            await _require_topic(consumer, config.fleet_circuits_topic, config, "--fleet-circuits-topic")
            views = await read_scopes(
                consumer, config.fleet_state_topic, config.fleet_circuits_topic, on_unreadable=unreadable
            )
        finally:
            await consumer.stop()
        shown = [
            v for v in views
            if (not args.open or v.circuit == "open") and (args.rule is None or v.rule == args.rule)
        ]
        for view in shown:
            if args.json:
                sys.stdout.write(msgspec.json.encode(view).decode() + "\n")
            else:
                sys.stdout.write(_fleet_line(view) + "\n")
        sys.stdout.flush()
        opened = sum(v.circuit == "open" for v in views)
        print(f"streamguard fleet: {len(views)} scope(s), {opened} circuit(s) open", file=sys.stderr)
        return EXIT_OK

    return _run_kafka_command("fleet", args, ("fleet_state_topic", "fleet_circuits_topic"), body)


async def _changelog_reader(
    config: Any, topic: str | None = None, flag: str = "--changelog-topic"
) -> tuple[Any, set[int]]:
    """A started group-less consumer and the partitions of a changelog (``topic``, the
    processors' by default; it joins no group: the jobs never notice it)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        **config.consumer_options(), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await _start_client(consumer, config)
    try:
        partitions = await _require_topic(consumer, topic or config.changelog_topic, config, flag)
    except BaseException:
        await consumer.stop()
        raise
    return consumer, partitions


async def _lookup_session(config: Any, session: str) -> Any:
    from .kafka.inspect import find_session

    consumer, partitions = await _changelog_reader(config)
    try:
        return await find_session(consumer, config.changelog_topic, len(partitions), session)
    finally:
        await consumer.stop()


def _view_line(view: Any) -> str:
    """One line of ``streamguard sessions``."""
    who = view.session + (f" ({view.agent})" if view.agent else "")
    if view.halted:
        state = f"HALTED by {', '.join(view.halted_by)}" + (f" ({view.halt_signal})" if view.halt_signal else "")
        if view.halted_at is not None:
            state += f" since {_timestamp(view.halted_at)}"
    elif view.cut_streak:
        state = f"active, {view.cut_streak} cut turn(s) in a row by {view.cut_by}"
    else:
        state = "active"
    line = f"{_timestamp(view.last_seen)} {who} p{view.partition} {state}"
    if view.queued_feedback:
        line += f", {len(view.queued_feedback)} feedback queued"
    if view.halted and view.halt_reason:
        line += f": {_one_line(view.halt_reason, 200)}"
    return line


def _cmd_sessions(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        print("streamguard sessions: --limit must be at least 1", file=sys.stderr)
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        import msgspec

        from .kafka.inspect import ScanStats, scan_sessions, session_filter

        consumer, partitions = await _changelog_reader(config)
        stats = ScanStats()
        halted = shown = 0

        def unreadable(partition: int, offset: int, reason: str) -> None:
            print(
                f"streamguard sessions: skipping an unreadable snapshot at "
                f"{config.changelog_topic}[{partition}]@{offset}: {reason}",
                file=sys.stderr,
            )

        try:
            keep = session_filter(halted=args.halted, agent=args.agent)
            async for view in scan_sessions(
                consumer, config.changelog_topic, partitions, keep=keep, stats=stats, on_unreadable=unreadable
            ):
                halted += view.halted
                if args.limit is not None and shown >= args.limit:
                    continue  # still counted
                shown += 1
                if args.json:
                    sys.stdout.write(msgspec.json.encode(view).decode() + "\n")
                else:
                    sys.stdout.write(_view_line(view) + "\n")
            sys.stdout.flush()
        finally:
            await consumer.stop()
        more = f", {stats.sessions - shown} not shown (--limit)" if shown < stats.sessions else ""
        print(
            f"streamguard sessions: {stats.sessions} session(s), {halted} halted{more}; read "
            f"{stats.records_read} records of {config.changelog_topic} ({stats.partitions} partitions) "
            f"in {stats.seconds:.1f} s",
            file=sys.stderr,
        )
        return EXIT_OK

    return _run_kafka_command("sessions", args, ("changelog_topic",), body)


_REHOME_TOPICS = (
    "group_id", "events_topic", "control_topic", "changelog_topic", "fleet_facts_topic", "fleet_state_topic",
)
_REHOME_BRIDGE_TOPICS = ("group_id", "sessions_topic", "bridge_changelog_topic")


async def _require_group_stopped(config: Any, group_id: str, job: str) -> None:
    """Refuse while the job's group has members: an instance running beside the move
    would write snapshots of the very sessions being moved."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import for_code

    admin = AIOKafkaAdminClient(**config.client_options())
    await _start_client(admin, config)
    try:
        described = await admin.describe_consumer_groups([group_id])
    finally:
        await admin.close()
    for response in described:
        for group in response.groups:
            error_code, state, members = group[0], group[2], group[5]
            if error_code:
                raise _CommandError(
                    f"cannot tell whether consumer group {group_id!r} is stopped "
                    f"({for_code(error_code).__name__}): grant Describe on the group, or pass --force",
                    EXIT_REJECTED,
                )
            if members:
                raise _CommandError(
                    f"consumer group {group_id!r} has {len(members)} member(s) (state {state}): "
                    f"stop every `{job}` of it first (an instance running meanwhile writes "
                    "snapshots of the sessions being moved), or pass --force",
                    EXIT_REJECTED,
                )


async def _require_drained(
    config: Any, group_id: str, inputs: list[str], partitions: set[int], job: str
) -> None:
    """Refuse while the group has records not yet processed on a partition some session
    moves away from: such a record would find its session's state gone (dead-lettered as
    not on its home partition, or, for the bridge, numbered from 1 again). Records on the
    other partitions are safe: they stay with their state."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    if not partitions:
        return
    tps = [TopicPartition(topic, p) for topic in inputs for p in sorted(partitions)]
    # A consumer of the group that never subscribes asks the coordinator for the group's
    # offsets of exactly these partitions, and never joins it.
    consumer = AIOKafkaConsumer(**{**config.consumer_options(), "group_id": group_id}, enable_auto_commit=False)
    await _start_client(consumer, config)
    try:
        committed = {tp: await consumer.committed(tp) for tp in tps}
        begins = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    behind = {}
    for tp in tps:
        mark = committed[tp]
        # none committed, or one below what retention left: the job starts at the log start
        done = max(mark, begins[tp]) if mark is not None and mark >= 0 else begins[tp]
        if ends[tp] > done:
            behind[tp] = ends[tp] - done
        elif done > ends[tp]:
            print(
                f"streamguard rehome: the group's offset {done} on {tp.topic}[{tp.partition}] is beyond "
                f"its end ({ends[tp]}; was the topic made anew?): the job will read it from the start",
                file=sys.stderr,
            )
    if behind:
        shown = ", ".join(f"{tp.topic}[{tp.partition}] {lag}" for tp, lag in sorted(behind.items())[:8])
        more = f" and {len(behind) - 8} more" if len(behind) > 8 else ""
        raise _CommandError(
            f"consumer group {group_id!r} has records not yet processed on partitions sessions "
            f"move away from ({shown}{more}): with the publishers stopped, run `{job}` until its lag "
            "is 0, stop it, and run this again (such a record would find its session's state gone), "
            "or pass --force",
            EXIT_REJECTED,
        )


async def _refusal_unless_dry_run(args: argparse.Namespace, check: Awaitable[None]) -> None:
    """A check's refusal; with --dry-run, said and gone on (the plan is still shown)."""
    try:
        await check
    except _CommandError as exc:
        if not args.dry_run:
            raise
        print(f"streamguard rehome: (dry run) a real run would refuse: {exc}", file=sys.stderr)


def _cmd_rehome(args: argparse.Namespace) -> int:
    if args.bridge and args.fleet:
        print("streamguard rehome: --bridge or --fleet, not both", file=sys.stderr)
        return EXIT_CONFIG
    mode = "--bridge" if args.bridge else "--fleet" if args.fleet else None
    own = {
        None: ("events_topic", "control_topic", "changelog_topic"),
        "--bridge": ("sessions_topic", "bridge_changelog_topic"),
        "--fleet": ("fleet_facts_topic", "fleet_state_topic"),
    }
    wrong = [f for m, fields in own.items() if m != mode for f in fields if getattr(args, f, None)]
    if wrong:
        flags = ", ".join("--" + f.replace("_", "-") for f in wrong)
        print(
            f"streamguard rehome: {flags} not with {mode or 'the processor changelog (no --bridge or --fleet)'}",
            file=sys.stderr,
        )
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        from aiokafka import AIOKafkaProducer

        from .kafka.rehome import BRIDGE, FLEET, PROCESSOR, apply_plan, plan_rehome, read_latest

        if args.bridge:
            changelog, flag, kind = config.bridge_changelog_topic, "--bridge-changelog-topic", BRIDGE
            group_id, job = config.group_id, "streamguard bridge"
            inputs = [(config.sessions_topic, "--sessions-topic")]
        elif args.fleet:
            changelog, flag, kind = config.fleet_state_topic, "--fleet-state-topic", FLEET
            group_id, job = config.fleet_group_id, "streamguard run"
            inputs = [(config.fleet_facts_topic, "--fleet-facts-topic")]
        else:
            changelog, flag, kind = config.changelog_topic, "--changelog-topic", PROCESSOR
            group_id, job = config.group_id, "streamguard run"
            inputs = [(config.events_topic, "--events-topic"), (config.control_topic, "--control-topic")]
        consumer, partitions = await _changelog_reader(config, changelog, flag)
        try:
            counts = {changelog: len(partitions)}
            for topic, topic_flag in inputs:
                counts[topic] = len(await _require_topic(consumer, topic, config, topic_flag))
            if len(set(counts.values())) != 1:
                listed = ", ".join(f"{topic} {count}" for topic, count in counts.items())
                raise _CommandError(
                    f"{' and '.join(counts)} must have the same partition count ({listed}): "
                    "raise them all to the new count first",
                    EXIT_CONFIG,
                )
            if not args.force:
                await _refusal_unless_dry_run(args, _require_group_stopped(config, group_id, job))
            latest = await read_latest(consumer, changelog, partitions)
        finally:
            await consumer.stop()
        plan = plan_rehome(latest, len(partitions), kind)
        if not args.force:
            sources = {m.source for m in plan.moves}
            await _refusal_unless_dry_run(
                args, _require_drained(config, group_id, [topic for topic, _ in inputs], sources, job)
            )
        for partition, session, reason in plan.unreadable:
            print(
                f"streamguard rehome: left in place, unreadable: {session!r} on "
                f"{changelog}[{partition}]: {reason}",
                file=sys.stderr,
            )
        for move in plan.moves:
            halted = (" (circuit open)" if args.fleet else " (halted)") if move.halted else ""
            if move.value is None:
                line = (
                    f"{move.session}{halted} p{move.source}: dropped, p{move.target} holds a newer snapshot"
                    if move.kept == move.target
                    else f"{move.session}{halted} p{move.source}: dropped, the copy on p{move.kept} moves"
                )
                if move.halted:
                    kept = (
                        f"the newer one on p{move.target}, which a processor wrote after the change"
                        if move.kept == move.target
                        else f"the copy seen last, moved from p{move.kept}"
                    )
                    print(
                        f"streamguard rehome: {move.session!r}: the halted copy on p{move.source} is dropped "
                        f"for {kept} (see `streamguard session` for whether that one is halted)",
                        file=sys.stderr,
                    )
            elif move.merged:
                line = f"{move.session}{halted} p{move.source} -> p{move.target}, merged with its other copies"
            else:
                line = f"{move.session}{halted} p{move.source} -> p{move.target}"
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if plan.moves and not args.dry_run:
            producer = AIOKafkaProducer(**config.producer_options(), acks="all", enable_idempotence=False)
            await _start_client(producer, config)
            try:
                await apply_plan(producer, changelog, plan)
            finally:
                await producer.stop()
        moved = plan.moved
        verb = "would move" if args.dry_run else "moved"
        print(
            f"streamguard rehome: {plan.sessions} {'scope' if args.fleet else 'session'}(s) on "
            f"{plan.partitions} partitions, "
            f"{plan.at_home} at home; {verb} {len(moved)} ({sum(m.halted for m in moved)} "
            f"{'with an open circuit' if args.fleet else 'halted'}), "
            f"{'would drop' if args.dry_run else 'dropped'} {len(plan.superseded)} older copies, "
            f"{len(plan.unreadable)} unreadable left in place",
            file=sys.stderr,
        )
        return EXIT_OK

    if args.bridge:
        from .otel.config import BridgeConfig

        return _run_kafka_command("rehome", args, _REHOME_BRIDGE_TOPICS, body, BridgeConfig)
    return _run_kafka_command("rehome", args, _REHOME_TOPICS, body)


def _cmd_session(args: argparse.Namespace) -> int:
    if args.outputs < 0:
        print("streamguard session: --outputs must be 0 or more", file=sys.stderr)
        return EXIT_CONFIG

    async def body(config: Any) -> int:
        import msgspec

        from .events import GuardrailTrip, output_decoder
        from .kafka.inspect import recent_records

        view = await _lookup_session(config, args.session)
        if view is None:
            raise _CommandError(
                f"no session {args.session!r} on {config.changelog_topic}: never seen, evicted, or "
                "not checkpointed yet",
                EXIT_NO_SESSION,
            )
        outputs: list[tuple[Any, Any]] = []
        if args.outputs:
            consumer, _ = await _changelog_reader(config)
            try:
                partitions = await _require_topic(consumer, config.alerts_topic, config, "--alerts-topic")
                records = await recent_records(
                    consumer, config.alerts_topic, len(partitions), args.session, limit=args.outputs
                )
            finally:
                await consumer.stop()
            for record in records:
                with contextlib.suppress(msgspec.DecodeError):
                    outputs.append((record, output_decoder.decode(record.value)))
        halted_since = None
        for record, output in outputs:
            if isinstance(output, GuardrailTrip) and output.session_halted:
                halted_since = record.timestamp / 1000.0
        if view.halted_at is not None:
            halted_since = view.halted_at  # the snapshot's own record of it
        if args.json:
            doc = msgspec.to_builtins(view)
            doc["halted_since"] = halted_since if view.halted else None
            doc["recent_outputs"] = [msgspec.to_builtins(o) for _, o in outputs]
            print(json.dumps(doc, sort_keys=True))
            return EXIT_OK
        print(f"session   {view.session}")
        print(f"agent     {view.agent or '-'}")
        if view.halted:
            since = f" since {_timestamp(halted_since)}" if halted_since is not None else ""
            print(f"state     HALTED by {', '.join(view.halted_by)}{since} ({view.halt_signal or '-'})")
            print(f"reason    {_one_line(view.halt_reason)}")
            for command in clearing_commands(view.session, view.halted_by, view.fleet_scope):
                print(f"clear it  {command}")
        else:
            print("state     active" + (f", {view.cut_streak} cut turn(s) in a row by {view.cut_by}" if view.cut_streak else ""))
        print(f"turn      {view.turn if view.turn is not None else '-'}" + (" (in progress)" if view.in_turn else ""))
        print(f"last seq  {view.last_seq if view.last_seq is not None else '-'}; {view.records_applied} records applied")
        print(f"last seen {_timestamp(view.last_seen)} (event time {_timestamp(view.last_event_ts)})")
        print(f"where     {config.changelog_topic}[{view.partition}]@{view.changelog_offset}")
        if view.queued_feedback:
            print(f"feedback  {len(view.queued_feedback)} queued for the next turn start:")
            for item in view.queued_feedback:
                print(f"  {item['signal']}: {_one_line(item['text'], 200)}")
        else:
            print("feedback  none queued")
        if args.outputs:
            print(f"last outputs ({len(outputs)}, newest last):" if outputs else "last outputs: none found")
            for record, output in outputs:
                print("  " + format_output(output, record.timestamp / 1000.0))
        return EXIT_OK

    return _run_kafka_command("session", args, ("changelog_topic", "alerts_topic"), body)


def _cmd_emit(args: argparse.Namespace) -> int:
    if args.rate is not None and not args.rate > 0:
        print("streamguard emit: --rate must be a positive number of events per second", file=sys.stderr)
        return EXIT_CONFIG
    import_failures: list[str] = []
    try:
        if args.from_format:
            source = _imported_source("emit", args.from_format, [args.file], import_failures)
        else:
            source = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"streamguard emit: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    except _CommandError as exc:
        print(f"streamguard emit: {exc}", file=sys.stderr)
        return exc.code
    code = _cmd_emit_source(args, source)
    # Files that failed to import were reported; the others were still checked or published.
    return EXIT_FAILURE if import_failures and code == EXIT_OK else code


def _cmd_emit_source(args: argparse.Namespace, source: Any) -> int:
    name = "stdin" if args.file == "-" else args.file
    if args.from_format:
        name += f" (imported from {args.from_format})"

    from .events import decode_agent_event

    counts: dict[str, Any] = {"published": 0, "bad": 0, "failed": 0}

    def check(lineno: int, raw: bytes) -> tuple[bytes, bytes] | None:
        """``(key, value)`` of a valid line; report and return None otherwise."""
        import msgspec

        from .events import ControlOnAgentStream, UnknownEventType

        line = raw.strip()
        if not line:
            return None
        try:
            event = decode_agent_event(line)
        except ControlOnAgentStream as exc:
            reason = f"{exc}; send resets with `streamguard reset`"
        except UnknownEventType as exc:
            reason = f"{exc} (contract v1 knows {', '.join(sorted(_agent_types()))})"
        except msgspec.DecodeError as exc:
            reason = str(exc)
        else:
            if args.restamp:
                line = _restamp(line)
            return event.session.encode(), line
        counts["bad"] += 1
        print(f"streamguard emit: {name}: line {lineno}: {reason}", file=sys.stderr)
        return None

    async def lines() -> Any:
        lineno = 0
        read = _threaded_lines(source) if source is sys.stdin.buffer else None
        while True:
            raw = await read() if read is not None else source.readline()
            if not raw:
                return
            lineno += 1
            yield lineno, raw

    async def body(config: Any) -> int:
        import asyncio

        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import MessageSizeTooLargeError

        topic = config.events_topic
        producer = AIOKafkaProducer(
            **config.producer_options(),
            acks="all",
            enable_idempotence=False,
            linger_ms=0 if args.rate else 5,
        )
        await _start_client(producer, config)
        pending: list[Any] = []
        first_error: list[str] = []

        def delivered(future: Any) -> None:
            if future.cancelled() or future.exception() is not None:
                counts["failed"] += 1
                if not first_error:
                    first_error.append(
                        "cancelled" if future.cancelled() else _kafka_reason(future.exception())
                    )
            else:
                counts["published"] += 1

        counts["topic"] = topic
        progress = _Progress("emit")
        try:
            await _require_topic(producer, topic, config, "--events-topic")
            pacer = Pacer(args.rate) if args.rate else None
            sent = 0
            async for lineno, raw in lines():
                if progress.enabled:
                    progress.update(
                        f"{sent:,} sent, {counts['published']:,} acknowledged, {counts['bad']:,} bad line(s)"
                    )
                checked = check(lineno, raw)
                if checked is None:
                    continue
                key, value = checked
                if pacer is not None:
                    delay = pacer.delay(time.monotonic())
                    if delay > 0:
                        await asyncio.sleep(delay)
                try:
                    future = await producer.send(topic, value=value, key=key)
                except MessageSizeTooLargeError as exc:
                    counts["bad"] += 1
                    print(f"streamguard emit: {name}: line {lineno}: {_kafka_reason(exc)}", file=sys.stderr)
                    continue
                sent += 1
                future.add_done_callback(delivered)
                pending.append(future)
                if len(pending) >= 1000:
                    await asyncio.wait(pending)
                    pending.clear()
            if pending:
                await asyncio.wait(pending)
        finally:
            progress.clear()
            await producer.stop()  # on Ctrl-C too: what was sent is flushed and counted
        summary = f"published {counts['published']} events to {topic}"
        if counts["bad"]:
            summary += f"; {counts['bad']} bad line(s) skipped"
        print(f"streamguard emit: {summary}", file=sys.stderr)
        if counts["failed"]:
            raise _CommandError(
                f"{counts['failed']} event(s) were not acknowledged by the cluster at "
                f"{config.bootstrap_servers} ({first_error[0]})"
            )
        return EXIT_REJECTED if counts["bad"] else EXIT_OK

    # stdin is left open: a reader thread may still be blocked on it after Ctrl-C,
    # and closing the buffer would wait for that read to finish.
    with contextlib.nullcontext(source) if source is sys.stdin.buffer else source:
        if args.check:
            # Validate only: no broker needed.
            valid = 0
            for lineno, raw in enumerate(source, 1):
                if check(lineno, raw) is not None:
                    valid += 1
            print(
                f"streamguard emit: {name}: {valid} valid event(s), {counts['bad']} bad line(s)",
                file=sys.stderr,
            )
            return EXIT_REJECTED if counts["bad"] else EXIT_OK
        code = _run_kafka_command("emit", args, ("events_topic",), body)
        if code == EXIT_INTERRUPTED:
            topic = counts.get("topic", "the events topic")
            print(
                f"streamguard emit: interrupted: published {counts['published']} events to {topic}"
                + (f"; {counts['bad']} bad line(s) skipped" if counts["bad"] else "")
                + (f"; {counts['failed']} not acknowledged" if counts["failed"] else ""),
                file=sys.stderr,
            )
        return code


def _threaded_lines(source: Any) -> Any:
    """An awaitable ``readline`` of a blocking stream (a live pipe must not stall the loop).

    The reads run in a daemon thread of their own, not in the loop's executor:
    on Ctrl-C, ``asyncio.run`` waits for its executor's threads, and one blocked
    on a pipe that stays open would keep the command from ever exiting.
    """
    import asyncio
    import os
    import threading

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1024)
    wanted = threading.Semaphore(1024)  # bounds the lines read ahead

    try:
        fd: int | None = source.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream: reads never block
        fd = None

    def chunks() -> Any:
        """Lines of the stream. A real file descriptor is read with os.read: a daemon
        thread blocked in a buffered read would hold the buffer's lock, and the
        interpreter aborts when it cannot take that lock at exit."""
        if fd is None:
            while raw := source.readline():
                yield raw
            return
        pending = b""
        while data := os.read(fd, 65536):
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line + b"\n"
        if pending:
            yield pending

    def pump() -> None:
        lines = chunks()
        while True:
            wanted.acquire()
            try:
                raw = next(lines, b"")
            except (OSError, ValueError):
                raw = b""
            try:
                loop.call_soon_threadsafe(queue.put_nowait, raw)
            except RuntimeError:  # the loop is closed: the command is over
                return
            if not raw:
                return

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()

    async def readline() -> bytes:
        raw = await queue.get()
        wanted.release()
        return raw

    return readline


def _restamp(line: bytes) -> bytes:
    """The event with a fresh ``ts`` (now) and no ``seq``, for ``emit --restamp``.

    A processor skips an event whose ``seq`` is not above its session's last
    (``streamguard_events_skipped_total{reason="seq_not_newer"}``), so a trace
    published twice is ignored the second time. Without a ``seq`` an event is
    always applied; its outputs then carry ``seq: null``.
    """
    import msgspec

    event = msgspec.json.decode(line)
    event.pop("seq", None)
    event["ts"] = round(time.time(), 6)
    return msgspec.json.encode(event)


def _agent_types() -> frozenset[str]:
    from .events import AGENT_EVENT_TYPES

    return AGENT_EVENT_TYPES


def _add_from_argument(parser: argparse.ArgumentParser, help_text: str, default: str | None = None) -> None:
    from .importers import FORMATS

    parser.add_argument(
        "--from",
        dest="from_format",
        metavar="FORMAT",
        choices=[*FORMATS, "auto"],
        default=default,
        help=f"{help_text}; one of {', '.join([*FORMATS, 'auto'])}",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamguard",
        description="Fleet-wide behavioural watchdog for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"streamguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    replay = sub.add_parser(
        "replay",
        help="run the detectors over JSONL traces offline",
        description=(
            "Run the detectors over recorded events (contract-v1 JSONL, resets allowed inline), "
            "offline: no broker. Several FILEs (or glob patterns) are replayed in turn through one "
            "engine, so a session may go on from one file to the next. The output events go to "
            "stdout, bad lines to stderr with their file and line number. Exit 0: clean input; 3: "
            "some lines were malformed or failed (the others were replayed); 1: unreadable input; "
            "2: bad policy or usage; 130: interrupted."
        ),
    )
    replay.add_argument(
        "files", nargs="*", metavar="FILE", help="JSONL events, glob patterns allowed (default: stdin; - is stdin)"
    )
    replay.add_argument(
        "--policy", help="policy TOML file [env STREAMGUARD_POLICY; default: built-in defaults]"
    )
    replay.add_argument(
        "--format",
        choices=["jsonl", "line"],
        default="jsonl",
        help="output: one JSON object per output (jsonl, the default) or one readable line, as `tail` prints",
    )
    replay.add_argument(
        "--summary",
        action="store_true",
        help="print a summary on stderr: counts, alerts and trips per signal, halted sessions (first 100)",
    )
    replay.add_argument(
        "--summary-format", choices=["json", "text"], default="json", help="the summary as one JSON line (default) or text"
    )
    _add_from_argument(replay, "FILEs are recorded session files or folders of this format (see `import`)")

    check = sub.add_parser(
        "check-config",
        help="validate a policy file",
        description=(
            "Validate a policy file: exit 0 if it loads (warnings for settings that cannot work "
            "as written), 2 with a message naming the field and the allowed values if not. With "
            "--defaults, print the complete effective policy as TOML."
        ),
    )
    check.add_argument("file", nargs="?", metavar="FILE", help="the policy TOML file")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.add_argument(
        "--defaults",
        action="store_true",
        help="print the complete effective policy as TOML (every default, or FILE merged onto them, with its [[agents]] overrides)",
    )

    schema = sub.add_parser(
        "schema",
        help="print the event contract's JSON Schemas",
        description=(
            "Print the JSON Schemas of the event contract (v1), generated from the code: agent "
            "events (what runtimes publish), control events (resets), output events (alerts, trips, "
            "feedback, reset receipts)."
        ),
    )
    schema.add_argument(
        "--family", choices=["all", "agent", "control", "output"], default="all", help="one family only (default: all)"
    )

    sub.add_parser("run", help="run the Kafka processor (see `streamguard run --help`)", add_help=False)
    sub.add_parser("bridge", help="run the OpenTelemetry bridge (see `streamguard bridge --help`)", add_help=False)

    tail = sub.add_parser(
        "tail",
        help="follow the output topic: alerts, trips, feedback, reset receipts",
        description="Follow the output topic, one line per event (Ctrl-C to stop).",
    )
    tail.add_argument("--json", action="store_true", help="print the raw JSON of each event")
    tail.add_argument(
        "--type", action="append", choices=_OUTPUT_TYPES, help="only this output type (repeatable)"
    )
    tail.add_argument("--signal", action="append", help="only this signal id (repeatable)")
    tail.add_argument(
        "--guardrail",
        action="append",
        choices=["watchdog", "cost_ceiling", "context_budget", "all"],
        help="only trips and resets of this guardrail (repeatable)",
    )
    tail.add_argument("--session", action="append", help="only this session (repeatable)")
    tail.add_argument(
        "--from-beginning", action="store_true", help="start at the oldest retained event"
    )
    tail.add_argument(
        "-n", "--max-events", type=int, metavar="N", help="exit after printing N events"
    )
    _add_kafka_args(tail, ("alerts_topic",))

    reset = sub.add_parser(
        "reset",
        help="clear a session's halt: write a reset to the control topic",
        description=(
            "Look SESSION up on the changelog, then write a reset for it to the control topic "
            "(keyed by session). Exit 6 if the session is not on the changelog (nothing is sent; "
            "--force sends anyway), 5 if it stays halted by another guardrail. With --wait, print "
            "the processor's acknowledgement: exit 0 if accepted, 3 if refused, 4 if none arrived "
            "in time."
        ),
    )
    reset.add_argument("session", metavar="SESSION", nargs="?")
    reset.add_argument(
        "--guardrail",
        choices=["watchdog", "cost_ceiling", "all"],
        help="which guardrail to reset (required with SESSION)",
    )
    reset.add_argument(
        "--scope",
        metavar="SCOPE",
        help="instead of a session: close the fleet circuit of SCOPE (rule:agent=NAME or "
        "rule:tenant=NAME, as `streamguard fleet` lists it); with --wait, wait until the "
        "circuits topic says it is closed",
    )
    reset.add_argument(
        "--add-budget",
        type=float,
        metavar="USD",
        help="raise the session's cost ceiling by this much (cost_ceiling or all)",
    )
    reset.add_argument("--by", help="who asks, echoed in the acknowledgement (default: your user name)")
    reset.add_argument(
        "--wait", action="store_true", help="wait for the acknowledgement on the output topic"
    )
    reset.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="how long --wait waits (default 30)"
    )
    reset.add_argument("--json", action="store_true", help="print the acknowledgement as JSON")
    reset.add_argument(
        "--force",
        action="store_true",
        help="send the reset without looking the session up on the changelog first",
    )
    _add_kafka_args(reset, ("control_topic", "alerts_topic", "changelog_topic", "fleet_circuits_topic"))

    fleet = sub.add_parser(
        "fleet",
        help="list the fleet scopes: their rolling windows and circuits",
        description=(
            "List every fleet scope ([[fleet]] rules, docs/fleet.md) from the fleet state and "
            "circuits topics: no group is joined. One line per scope (circuit, window totals), or "
            "one JSON object per line with --json. The windows are at most one fleet-stage "
            "checkpoint (about 1 s) behind."
        ),
    )
    fleet.add_argument("--open", action="store_true", help="only scopes whose circuit is open")
    fleet.add_argument("--rule", metavar="NAME", help="only the scopes of this rule")
    fleet.add_argument("--json", action="store_true", help="one JSON object per scope")
    _add_kafka_args(fleet, ("fleet_state_topic", "fleet_circuits_topic"))

    sessions = sub.add_parser(
        "sessions",
        help="list the fleet's sessions from the changelog (which are halted, by what, why)",
        description=(
            "List every session the processors hold, from the changelog topic: no group is joined, "
            "so it runs from any machine and the processors do not notice. One line per session "
            "(last seen, partition, state, halt reason), or one JSON object per line with --json; "
            "counts on stderr. The changelog is at most one checkpoint (about 1 s) behind."
        ),
    )
    sessions.add_argument("--halted", action="store_true", help="only halted sessions")
    sessions.add_argument("--agent", metavar="GLOB", help="only sessions whose agent matches this glob")
    sessions.add_argument("--json", action="store_true", help="one JSON object per session")
    sessions.add_argument("--limit", type=int, metavar="N", help="show at most N sessions (all are counted)")
    _add_kafka_args(sessions, ("changelog_topic",))

    session = sub.add_parser(
        "session",
        help="show one session: state, halts, queued feedback, last outputs",
        description=(
            "Show one session from the changelog (state, halt and its reason, queued feedback) and "
            "its last outputs from the output topic. Exit 6 if the session is not on the changelog."
        ),
    )
    session.add_argument("session", metavar="ID")
    session.add_argument("--json", action="store_true", help="print it as one JSON object")
    session.add_argument(
        "--outputs", type=int, default=10, metavar="N", help="show its last N outputs (default 10; 0: none)"
    )
    _add_kafka_args(session, ("changelog_topic", "alerts_topic"))

    rehome = sub.add_parser(
        "rehome",
        help="after raising the partition count, move each session's snapshot to its new home",
        description=(
            "After the partition count of the events, control and changelog topics was raised "
            "(together, with the processors stopped), move every session snapshot that is no longer "
            "on its session's home partition (murmur2 of the key) there, and tombstone the old copy, "
            "so that halts survive the change; with --bridge, the same for the OpenTelemetry bridge's "
            "changelog. Refuses while the consumer group has members. "
            "Idempotent: run it again after an interruption. One line per moved session on stdout, "
            "the counts on stderr."
        ),
    )
    rehome.add_argument("--dry-run", action="store_true", help="show what would move; write nothing")
    rehome.add_argument(
        "--bridge",
        action="store_true",
        help=(
            "rehome `streamguard bridge`'s changelog instead, after the count of its sessions topic and "
            "changelog changed; every setting is then read as the bridge reads it (STREAMGUARD_BRIDGE_* "
            "environment, the group streamguard-bridge by default)"
        ),
    )
    rehome.add_argument(
        "--fleet",
        action="store_true",
        help=(
            "rehome the fleet stage's state topic instead ([[fleet]] scopes), after the count of the "
            "fleet facts and state topics changed (the group is the processors' --group-id plus .fleet)"
        ),
    )
    rehome.add_argument(
        "--sessions-topic",
        help="with --bridge: the bridge's sessions topic [env STREAMGUARD_BRIDGE_SESSIONS_TOPIC; "
        "default streamguard.otel.sessions]",
    )
    rehome.add_argument(
        "--bridge-changelog-topic",
        help="with --bridge: the bridge's changelog [env STREAMGUARD_BRIDGE_BRIDGE_CHANGELOG_TOPIC; "
        "default streamguard.otel.changelog]",
    )
    rehome.add_argument(
        "--force", action="store_true", help="run even while the consumer group has members (unsafe)"
    )
    _add_kafka_args(rehome, _REHOME_TOPICS)

    emit = sub.add_parser(
        "emit",
        help="publish a JSONL trace of agent events to the events topic",
        description=(
            "Publish agent events, one JSON object per line, keyed by session. Every line is "
            "validated first; bad lines are reported with their line numbers and skipped."
        ),
    )
    emit.add_argument("file", metavar="FILE|-", help="JSONL events, or - for stdin")
    emit.add_argument("--rate", type=float, metavar="N", help="at most N events per second")
    emit.add_argument(
        "--check", action="store_true", help="validate only, publish nothing (needs no broker)"
    )
    emit.add_argument(
        "--restamp",
        action="store_true",
        help=(
            "publish every event with a fresh ts (now) and without its seq, so a trace already "
            "applied is applied again (a processor skips events whose seq is not newer)"
        ),
    )
    _add_from_argument(emit, "FILE is a recorded session file or folder of this format (see `import`)")
    _add_kafka_args(emit, ("events_topic",))

    imp = sub.add_parser(
        "import",
        help="convert recorded sessions of other agent harnesses to contract-v1 JSONL",
        description=(
            "Convert recorded sessions (SWE-agent, mini-SWE-agent, Claude Code, OpenAI-style chat "
            "logs, Who&When) to contract-v1 JSONL, one session after another. Folders are searched "
            "recursively. A file that cannot be imported is reported with its record and skipped; "
            "the exit code is then 1. The mappings are documented in docs/import.md."
        ),
    )
    imp.add_argument("paths", nargs="+", metavar="PATH", help="session files or folders")
    _add_from_argument(imp, "the format of the files (default: detect each file's)", default="auto")
    imp.add_argument("-o", "--output", metavar="FILE", help="write the JSONL here (default: stdout)")

    from .demo import add_arguments as add_demo_arguments

    demo = sub.add_parser(
        "demo",
        help="a synthetic fleet through an embedded broker: see what is caught, live",
        description=(
            "Start a local broker and the processor, publish a synthetic fleet (healthy sessions "
            "and every failure shape), show what is caught, then compare it with what was "
            "planted. Exit 0: every planted shape caught and no false alarms; 1: not so, or the "
            "run failed; 130/143: stopped by SIGINT/SIGTERM."
        ),
    )
    add_demo_arguments(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        return _cmd_run(argparse.Namespace(), argv[1:])
    if argv and argv[0] == "bridge":
        from .otel.command import main as bridge_main

        return bridge_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "check-config":
            return _cmd_check_config(args)
        if args.command == "schema":
            return _cmd_schema(args)
        if args.command == "tail":
            return _cmd_tail(args)
        if args.command == "reset":
            return _cmd_reset(args)
        if args.command == "emit":
            return _cmd_emit(args)
        if args.command == "sessions":
            return _cmd_sessions(args)
        if args.command == "fleet":
            return _cmd_fleet(args)
        if args.command == "session":
            return _cmd_session(args)
        if args.command == "rehome":
            return _cmd_rehome(args)
        if args.command == "import":
            return _cmd_import(args)
        if args.command == "demo":
            from .demo import main as demo_main

            args.policy = _policy_path("demo", args.policy)
            if args.policy:
                _warn_policy(load_policy_set(args.policy), "demo")
            return demo_main(args)
    except PolicyError as exc:
        print(f"streamguard {args.command}: policy error: {exc}{policy_hint(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG
    except BrokenPipeError:  # pragma: no cover - e.g. piped into `head`
        return EXIT_OK
    parser.error(f"unknown command {args.command}")
    return EXIT_CONFIG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
