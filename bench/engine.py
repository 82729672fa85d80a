"""Engine benchmark: events per second on one core, and bytes of state per session.

Usage::

    python bench/engine.py              # full run (10,000 sessions, 100,000 for state)
    python bench/engine.py --quick      # smoke run, seconds
    python bench/engine.py --json       # machine-readable result on stdout
    python bench/engine.py --profile    # add a cProfile of one engine pass

Throughput
    A synthetic fleet (:mod:`streamguard.fleet`: healthy sessions plus a share of
    planted failures) is generated first and kept in memory; generation is not
    timed. Each timed pass feeds every event, in fleet order, to a fresh
    :class:`~streamguard.engine.Engine` under the default policy. Two figures:
    *engine*, from decoded events, and *decode+engine*, from the JSON bytes an
    events topic carries (``decode_agent_event`` then ``process``). Each is the
    median of ``--passes`` passes.

State
    ``--state-sessions`` sessions are each fed a prefix of a generated session
    (cut at a random event, so most are mid-turn) under ``tracemalloc``; the
    bytes still allocated afterwards, divided by the number of sessions, are the
    memory an active session costs the engine. The msgpack snapshot of each
    session is measured too. Sessions are rendered from a pool of generated
    templates under distinct session ids.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

try:
    import streamguard  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without an installed package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from msgspec import structs

from streamguard.engine import Engine
from streamguard.events import AgentEvent, decode_agent_event, encode
from streamguard.fleet import fleet, plan_fleet, session_events
from streamguard.policy import PolicySet, load_policy_set

TARGET_EVENTS_PER_S = 200_000
TARGET_STATE_BYTES = 2048

# Every guardrail on: the opt-in detectors and both cost bounds (high enough that a
# healthy session never reaches them, so the figure measures detection, not halts).
ALL_ENABLED_POLICY = """
[signals.window-repeat]
enabled = true
[verification]
enabled = true
[cost_ceiling]
max_turn_usd = 50.0
max_session_usd = 500.0
"""

POLICY: PolicySet = PolicySet()


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": model,
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def _engine_pass(events: list[AgentEvent]) -> tuple[float, int]:
    engine = Engine(POLICY)
    process = engine.process
    outputs = 0
    gc.collect()
    start = time.perf_counter()
    for event in events:
        out = process(event)
        if out:
            outputs += len(out)
    return time.perf_counter() - start, outputs


def _decode_pass(blobs: list[bytes]) -> float:
    engine = Engine(POLICY)
    process = engine.process
    decode = decode_agent_event
    gc.collect()
    start = time.perf_counter()
    for blob in blobs:
        process(decode(blob))
    return time.perf_counter() - start


def throughput(n_sessions: int, seed: int, loops_fraction: float, passes: int) -> dict[str, Any]:
    started = time.perf_counter()
    events = list(fleet(n_sessions, seed=seed, loops_fraction=loops_fraction))
    generated_s = time.perf_counter() - started
    blobs = [encode(e) for e in events]
    kinds = Counter(type(e).__name__ for e in events)

    engine_times = []
    outputs = 0
    for _ in range(passes):
        elapsed, outputs = _engine_pass(events)
        engine_times.append(elapsed)
    decode_times = [_decode_pass(blobs) for _ in range(passes)]
    # The same events one session after another: what an event costs when its
    # session's state is still in the CPU caches (a lower bound, not a fleet figure).
    grouped = sorted(events, key=lambda e: (e.session, e.seq))
    grouped_times = [_engine_pass(grouped)[0] for _ in range(passes)]

    n = len(events)
    engine_rate = n / statistics.median(engine_times)
    decode_rate = n / statistics.median(decode_times)
    return {
        "sessions": n_sessions,
        "events": n,
        "event_mix": dict(sorted(kinds.items())),
        "mean_event_bytes": round(sum(map(len, blobs)) / n, 1),
        "outputs_per_pass": outputs,
        "generation_s": round(generated_s, 2),
        "passes": passes,
        "engine_events_per_s": round(engine_rate),
        "engine_pass_s": [round(t, 3) for t in engine_times],
        "decode_engine_events_per_s": round(decode_rate),
        "decode_engine_pass_s": [round(t, 3) for t in decode_times],
        "engine_by_session_events_per_s": round(n / statistics.median(grouped_times)),
        "peak_active_sessions": _peak_active(events),
    }


def _peak_active(events: list[AgentEvent]) -> int:
    """Most sessions open at once (between their first and last event)."""
    spans: dict[str, list[float]] = {}
    for event in events:
        ts = event.ts or 0.0
        span = spans.get(event.session)
        if span is None:
            spans[event.session] = [ts, ts]
        else:
            span[1] = ts
    edges = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()])
    peak = active = 0
    for _, step in edges:
        active += step
        peak = max(peak, active)
    return peak


def state_size(n_sessions: int, seed: int, loops_fraction: float, templates: int) -> dict[str, Any]:
    """Traced bytes per active session, and msgpack snapshot bytes per session."""
    plans = plan_fleet(templates, seed=f"state/{seed}", loops_fraction=loops_fraction)
    cut = random.Random(f"cut/{seed}")
    prefixes = []
    for plan in plans:
        events = session_events(plan)
        # As JSON bytes: every session decodes its own strings, as from a topic.
        prefixes.append([encode(e) for e in events[: cut.randint(1, len(events))]])
    fed = 0

    engine = Engine(POLICY)
    engine.watchdog_for(None)  # the policy's watchdog is shared, not per-session state
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    replace = structs.replace
    decode = decode_agent_event
    process = engine.process
    for i in range(n_sessions):
        session = f"sess-{i:07d}"
        prefix = prefixes[i % templates]
        for blob in prefix:
            process(replace(decode(blob), session=session))
        fed += len(prefix)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()

    sizes = sorted(len(engine.snapshot(session) or b"") for session in engine.sessions)
    return {
        "state_sessions": len(engine.sessions),
        "state_events_fed": fed,
        "state_templates": templates,
        "state_bytes_per_session": round((after - before) / len(engine.sessions)),
        "snapshot_bytes_mean": round(statistics.fmean(sizes)),
        "snapshot_bytes_median": round(statistics.median(sizes)),
        "snapshot_bytes_p99": sizes[int(len(sizes) * 0.99) - 1],
        "snapshot_bytes_max": sizes[-1],
    }


def profile(n_sessions: int, seed: int, loops_fraction: float, top: int) -> str:
    events = list(fleet(n_sessions, seed=seed, loops_fraction=loops_fraction))
    profiler = cProfile.Profile()
    engine = Engine(POLICY)
    process = engine.process
    profiler.enable()
    for event in events:
        process(event)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return buffer.getvalue()


def render(result: dict[str, Any]) -> str:
    ok = "ok" if result["engine_events_per_s"] >= TARGET_EVENTS_PER_S else "MISSED"
    ok_state = "ok" if result["state_bytes_per_session"] <= TARGET_STATE_BYTES else "MISSED"
    rows = [
        ("machine", f"{result['machine']['cpu']}, nproc {result['machine']['nproc']}, "
                    f"Python {result['machine']['python']}"),
        ("fleet", f"{result['sessions']:,} sessions (peak {result['peak_active_sessions']:,} "
                  f"open at once), {result['events']:,} events "
                  f"(mean {result['mean_event_bytes']} B as JSON), "
                  f"{result['outputs_per_pass']:,} outputs per pass"),
        ("engine", f"{result['engine_events_per_s']:,} events/s "
                   f"(median of {result['passes']}; target >= {TARGET_EVENTS_PER_S:,}: {ok})"),
        ("decode+engine", f"{result['decode_engine_events_per_s']:,} events/s "
                          f"(median of {result['passes']})"),
        ("by session", f"{result['engine_by_session_events_per_s']:,} events/s "
                       "(engine, same events grouped by session: cache-warm bound)"),
        ("state", f"{result['state_bytes_per_session']:,} B per active session over "
                  f"{result['state_sessions']:,} sessions "
                  f"(target <= {TARGET_STATE_BYTES:,}: {ok_state})"),
        ("snapshot", f"msgpack mean {result['snapshot_bytes_mean']} B, median "
                     f"{result['snapshot_bytes_median']} B, p99 {result['snapshot_bytes_p99']} B, "
                     f"max {result['snapshot_bytes_max']} B"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--state-sessions", type=int, default=100_000)
    parser.add_argument("--templates", type=int, default=2_000,
                        help="distinct generated sessions behind the state measurement")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--loops-fraction", type=float, default=0.1)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 300 sessions, 2 passes, 2,000 state sessions")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--policy", help="policy TOML file (default: the default policy)")
    parser.add_argument("--all-enabled", action="store_true",
                        help="every signal and guardrail on (opt-in ones and cost bounds too)")
    parser.add_argument("--profile", type=int, nargs="?", const=25, default=0, metavar="TOP",
                        help="print a cProfile of one engine pass (top TOP functions)")
    args = parser.parse_args(argv)
    global POLICY
    if args.all_enabled:
        from streamguard.policy import parse_policy_set

        POLICY = parse_policy_set(ALL_ENABLED_POLICY, "all-enabled")
    elif args.policy:
        POLICY = load_policy_set(args.policy)
    if args.quick:
        args.sessions, args.passes = 300, 2
        args.state_sessions, args.templates = 2_000, 200

    result: dict[str, Any] = {"machine": machine(), "command": " ".join(["bench/engine.py",
                                                                        *sys.argv[1:]])}
    result["policy"] = "all-enabled" if args.all_enabled else (args.policy or "default")
    result["signals"] = [sig.id for sig in Engine(POLICY).watchdog_for(None).signals]
    result["seed"] = args.seed
    result["loops_fraction"] = args.loops_fraction
    result.update(throughput(args.sessions, args.seed, args.loops_fraction, args.passes))
    result.update(state_size(args.state_sessions, args.seed, args.loops_fraction,
                             min(args.templates, args.state_sessions)))
    result["targets"] = {
        "engine_events_per_s": TARGET_EVENTS_PER_S,
        "state_bytes_per_session": TARGET_STATE_BYTES,
        "engine_met": result["engine_events_per_s"] >= TARGET_EVENTS_PER_S,
        "state_met": result["state_bytes_per_session"] <= TARGET_STATE_BYTES,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    if args.profile:
        print(profile(args.sessions, args.seed, args.loops_fraction, args.profile),
              file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
