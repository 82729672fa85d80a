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

The package has four parts, the pure ones testable without a broker:

* :mod:`.shapes` (pure): the session shapes, what each must raise, the decks;
* :mod:`.score` (pure): what fired against what was planted: catches, misses,
  open sessions, false alarms, verdicts;
* :mod:`.render`: the live table, the status line, the summary report (text
  from plain data), and the terminal writer;
* :mod:`.run` (imperative): the broker, the processor, the feeding, the
  controller, the drain and shutdown, and the command (:func:`main`).

Everything the command line and callers use is importable from here.
"""

from __future__ import annotations

from .render import LiveView, fit_to_height, format_summary
from .run import (
    DEMO_POLICY,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_USAGE,
    Demo,
    DemoOptions,
    add_arguments,
    main,
    policy_text,
    run_demo,
)
from .score import LiveTally, OutputTally, Score, SessionFacts, live_tally, score
from .shapes import (
    ALL_FAILURES,
    ALL_HEALTHY,
    ALL_PLANTED,
    DEMO_FAILURES,
    DEMO_HEALTHY,
    DEMO_PLANTED,
    DemoShape,
    Shape,
    demo_session_events,
    session_plans,
    shape_deck,
    shape_of,
)

__all__ = [
    "ALL_FAILURES",
    "ALL_HEALTHY",
    "ALL_PLANTED",
    "DEMO_FAILURES",
    "DEMO_HEALTHY",
    "DEMO_PLANTED",
    "DEMO_POLICY",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "EXIT_USAGE",
    "Demo",
    "DemoOptions",
    "DemoShape",
    "LiveTally",
    "LiveView",
    "OutputTally",
    "Score",
    "SessionFacts",
    "Shape",
    "add_arguments",
    "demo_session_events",
    "fit_to_height",
    "format_summary",
    "live_tally",
    "main",
    "policy_text",
    "run_demo",
    "score",
    "session_plans",
    "shape_deck",
    "shape_of",
]
