"""The demo's session shapes: what each synthetic session does, and what it must raise.

Pure and deterministic: the shapes the demo plants on top of the synthetic
fleet's (:mod:`streamguard.fleet`), the signals every failure shape is built to
raise (:data:`ALL_PLANTED`, which scoring judges against), the events of one
planned session, and the endless deck-after-deck stream of planned sessions.
Everything follows from the seed; nothing here touches a broker or a clock.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from .. import fleet as _fleet
from ..events import AgentEvent, TurnEnd
from ..fleet import FAILURES, HEALTHY, PLANTED, Scenario, SessionPlan, plan_fleet, session_events

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
    RUNNER_SETUP_DETOUR = "runner_setup_detour"
    REPEATED_USER_QUESTION = "repeated_user_question"
    ORDER_FLIP_FLOP = "order_flip_flop"


DEMO_HEALTHY: tuple[DemoShape, ...] = (DemoShape.RUNNER_DISTINCT, DemoShape.RUNNER_EDIT_TEST)
DEMO_FAILURES: tuple[DemoShape, ...] = tuple(s for s in DemoShape if s not in DEMO_HEALTHY)
DEMO_PLANTED: dict[DemoShape, frozenset[str]] = {
    DemoShape.RUNNER_FAILING_RERUN: frozenset({"failure-loop"}),
    # A runtime that publishes no results: the lap is seen by its calls alone.
    DemoShape.RUNNER_LONG_CYCLE: frozenset({"long-loop"}),
    DemoShape.RUNNER_PAGING_SCAN: frozenset({"near-duplicate-calls"}),
    DemoShape.RUNNER_REWORDED_GREP: frozenset({"near-duplicate-calls", "result-stall"}),
    DemoShape.REPEATED_USER_QUESTION: frozenset({"chat-stall"}),
    DemoShape.RUNNER_SETUP_DETOUR: frozenset({"setup-detour"}),
    DemoShape.ORDER_FLIP_FLOP: frozenset({"write-cycle"}),
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
    """Page on through a short file past its end, fifty lines at a time, looking for
    something that is not in it: the first page is the whole file, every later one empty.
    (Paging through new content is reading, and warns nobody.)"""
    path = f"{b.rng.choice(_fleet._DIRS)}/{b.rng.choice(_fleet._FILES)}"
    for page in range(12):
        _sh(b, f"sed -n '{page * 50 + 1},{page * 50 + 50}p' {path}",
            _fleet._payload(path, b.rng) if page == 0 else "")


def _runner_reworded_grep(b: Any) -> None:
    """Search again and again for a symbol that does not exist, re-spelling it."""
    spellings = ["parseSettings", "parse_settings", "ParseSettings", "parse-settings",
                 "PARSE_SETTINGS", "parsesettings", "Parse_Settings", "parse__settings",
                 "parseSETTINGS", "PaRsE_sEtTiNgS"]
    flags = ["-rn", "-rni", "-r", "-rnw"]
    for i, spelling in enumerate(spellings):
        _sh(b, f"grep {flags[i % 4]} {spelling} src/", "")


def _runner_setup_detour(b: Any) -> None:
    """A missing compiler, then package installs, mirror edits and network probes, failing."""
    rng = b.rng
    _sh(b, "python -m pytest -q", error="ERROR: javac: command not found")
    mirrors = ["archive", "old-releases", "mirror.example", "deb.example"]
    packages = ["default-jdk", "openjdk-17-jdk", "openjdk-11-jdk", "maven"]
    for attempt in range(3):
        _sh(b, "sudo apt-get update", "Reading package lists... Done\nW: Failed to fetch")
        _sh(b, f"sudo apt-get install -y {packages[attempt]}", error="EXECUTION TIMED OUT")
        _sh(b, f"sudo sed -i 's/{mirrors[attempt]}/{mirrors[attempt + 1]}/' /etc/apt/sources.list", "")
        if rng.random() < 0.5:
            _sh(b, "ping -c 1 deb.example", error="ping: unknown host")
        else:
            _sh(b, "which javac", "")


def _order_flip_flop(b: Any) -> None:
    """A trading agent buying and selling the same shares on every tick of a quote that
    keeps moving, the bars re-read now and then: only the orders repeat."""
    rng = b.rng
    symbol = rng.choice(("TSLA", "NVDA", "AMD", "SHOP"))
    price = rng.uniform(50, 400)
    b.step("get_account", {}, None, {"buying_power": f"{rng.uniform(5e4, 2e5):.2f}"})
    for lap in range(6):
        if lap % 2 == 1:
            b.step("get_bars", {"symbol": symbol, "timeframe": "5Min", "limit": 6}, None,
                   {"bars": [round(price + rng.uniform(-1, 1), 2) for _ in range(6)]})
        for side in ("buy", "sell"):
            price += rng.uniform(-0.3, 0.3)
            b.step("get_quote", {"symbol": symbol}, None,
                   {"ap": round(price, 2), "ax": rng.choice("ZVQNKP"), "t": f"{lap}{side}"})
            b.step("place_order", {"symbol": symbol, "qty": 50, "side": side, "type": "market"}, None,
                   {"id": f"{rng.getrandbits(64):016x}", "status": "accepted"})


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
    DemoShape.RUNNER_SETUP_DETOUR: _runner_setup_detour,
    DemoShape.ORDER_FLIP_FLOP: _order_flip_flop,
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


Shape = Scenario | DemoShape
"""A session's shape: one of the fleet's scenarios or one of the demo's own."""
