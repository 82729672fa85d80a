"""The ``streamguard`` command line.

Exit codes: 0 success; 1 a runtime failure (unreadable input, broker
unreachable); 2 a usage or configuration error (the message names the setting).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .policy import PolicyError, load_policy_set

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


def _cmd_replay(args: argparse.Namespace) -> int:
    from .engine import Engine
    from .replay import ReplayReport, replay_lines

    policies = load_policy_set(args.policy)
    engine = Engine(policies)
    report = ReplayReport()
    out = sys.stdout.buffer
    try:
        source = sys.stdin.buffer if args.file in (None, "-") else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"streamguard replay: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    with source:
        for encoded in replay_lines(source, engine, errors=sys.stderr, report=report):
            out.write(encoded)
            out.write(b"\n")
    out.flush()
    if args.summary:
        summary = {
            "lines": report.lines,
            "events": report.events,
            "controls": report.controls,
            "outputs": report.outputs,
            "malformed": report.malformed,
            "unknown_types": report.unknown_types,
            "replays_skipped": report.replays_skipped,
            "sessions": len(engine.sessions),
            "halted_sessions": sorted(s for s, st in engine.sessions.items() if st.halted_by),
        }
        print(json.dumps(summary, sort_keys=True), file=sys.stderr)
    return EXIT_OK


def _cmd_check_config(args: argparse.Namespace) -> int:
    if args.defaults:
        from .policy import render_policy

        sys.stdout.write(render_policy(load_policy_set(args.file).base if args.file else None))
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
    }
    if args.json:
        print(json.dumps(info, sort_keys=True))
    else:
        print(f"{args.file}: ok")
        print(f"  mode: {info['mode']}")
        print(f"  signals: {', '.join(info['signals']) or '(none)'}")
        for pattern in info["agent_overrides"]:
            print(f"  override for agents matching {pattern!r}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from .events import json_schemas

    schemas = json_schemas()
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

    try:
        config = ProcessorConfig.from_args(list(argv))
    except ConfigError as exc:
        print(f"streamguard run: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    anyio.run(run_processor, config)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamguard",
        description="Fleet-wide behavioural watchdog for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"streamguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    replay = sub.add_parser("replay", help="run the detectors over a JSONL trace offline")
    replay.add_argument("file", nargs="?", default="-", help="JSONL events (default: stdin)")
    replay.add_argument("--policy", help="policy TOML file (default: built-in defaults)")
    replay.add_argument("--summary", action="store_true", help="print a JSON summary on stderr")

    check = sub.add_parser("check-config", help="validate a policy file")
    check.add_argument("file", nargs="?")
    check.add_argument("--json", action="store_true")
    check.add_argument(
        "--defaults",
        action="store_true",
        help="print the complete effective policy as TOML (every default, or FILE merged onto them)",
    )

    schema = sub.add_parser("schema", help="print the event contract's JSON Schemas")
    schema.add_argument("--family", choices=["all", "agent", "control", "output"], default="all")

    sub.add_parser("run", help="run the Kafka processor (see `streamguard run --help`)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        return _cmd_run(argparse.Namespace(), argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return _cmd_replay(args)
        if args.command == "check-config":
            return _cmd_check_config(args)
        if args.command == "schema":
            return _cmd_schema(args)
    except PolicyError as exc:
        print(f"streamguard {args.command}: policy error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except BrokenPipeError:  # pragma: no cover - e.g. piped into `head`
        return EXIT_OK
    parser.error(f"unknown command {args.command}")
    return EXIT_CONFIG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
