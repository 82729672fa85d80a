"""``context-pressure`` and ``context-budget``: the in-turn context estimate.

What it catches
    A context window that fills *inside* a turn. The provider's figure for the
    last model call describes the context before the tool results that came
    back since; one wide log or JSON dump can push the next request past the
    window while every measured number still looks comfortable. The estimate
    here is the last measured ``input_tokens`` plus the bytes of tool results
    since, at **3 bytes a token** — deliberately below the usual four-byte
    rule, because JSON, YAML and logs tokenize worse than prose and because an
    over-count only costs an early compaction while an under-count costs the
    overflow itself. ``result_bytes`` on a ``tool_result`` is used when the
    agent sends it (agents that ship no payload are still counted); otherwise
    the payload's JSON size. Assistant text is not added: the provider's next
    usage figure measures it better. The next ``usage`` with ``input_tokens``
    replaces the estimate.

Thresholds and why
    ``context-pressure`` (warn) when the estimate crosses the model tier's
    compaction threshold — 0.85 frontier, 0.65 mid, 0.35 small, matched by glob
    on the model id, because smaller models degrade well before their window is
    full; unknown models use ``default_threshold`` (0.85). ``context-budget``
    (a turn cut, guardrail ``context_budget``) at **0.95**: past that the next
    request is likely to fail at the provider. Both fire only when an
    unmeasured tail exists (a measured figure alone triggers nothing in-turn),
    and each at most once per turn. A model's window comes from the usage
    event's ``context_window``, else from ``model_windows`` (the published
    windows of the Claude, GPT-4o/4.1/5, o3/o4-mini and Gemini 2.5/3 families by
    default; for GPT-5 the 272,000 tokens a request may send). An unknown window is assumed to be
    **128,000** tokens and the alert says so: guessing small costs a visible
    early warning, guessing large costs the session. Before the session's first
    usage event names a window or measures ``input_tokens``, that estimate is two
    guesses (the window, and what the runtime sends the model of the results), so it
    warns and does not cut (``cut_unmeasured = true`` cuts on it too), and so does an
    estimate holding one result of more than twice the whole window, until the next
    measure: no model could be sent it, so the runtime cut or summarised it (a 2.5 MB page declared,
    9,800 tokens measured after it, in a blind batch). Six healthy
    paging sessions of the blind batches, each declaring results of 100 KB to 2 MB while
    its runtime sent the model a few hundred tokens of each (the usage events after
    showed 6,000 to 130,000 tokens in all), were cut at their second to fifth result. In
    the real-session benchmark two SWE-agent runs that reported no usage lose a cut at
    their very last call (the harness stopped them for the context the call after;
    judged unclear, no call saved), and nothing else changes.

Severity and scope
    The pressure alert is warn: it is advice to compact. The cut is critical
    with turn scope and acts whenever this guardrail is enabled: it ends the
    turn in flight so the runtime can compact before the next one. It is not a
    halt, needs no reset and does not count toward the three-cut-turn
    escalation.

Images
    An image block in a structured result (``{"type": "image", "source": {"data":
    <base64>}}``: a computer-use or browser screenshot) is counted as
    ``IMAGE_TOKENS`` (1,600), the most a vendor charges for one image, not as the
    bytes of its base64: a full-page screenshot of 900 KB is about 1,600 tokens to
    the model, not 300,000, and counting its bytes cut a browser agent's turn at its
    first screenshot. A runtime that sends only ``result_bytes`` for such a result
    is still counted by its bytes (nothing says it held an image), except a
    computer-use tool's (OpenAI's ``computer_use_preview``, Anthropic's ``computer``
    and its dated names), which answers every action
    with a screenshot: three healthy computer-use sessions of the forty-fifth blind
    batch, each screenshot sent as a digest and its 200–400 KB, were cut at their
    second to fifth call; and six of the fifty-sixth, each screenshot sent as a
    summary (``{"type": "computer_screenshot", "current_url": ..., "screenshot_sha256":
    ...}``) beside its declared 220 KB, were cut at their first, against
    ``computer-use-preview``'s 8,192-token window. Such an answer of a computer-use
    tool is its strings and one image (text sent beside the screenshot, an
    accessibility tree, is counted as text), and OpenAI's ``computer_screenshot``
    block is an image block in any tool's answer. So is an answer whose digest is a
    perceptual hash (``phash:``, ``dhash:``: only an image has one); sent by its size
    alone, the answer of a GUI agent's own action sent as a tool (UI-TARS's
    ``left_double``, ``hotkey``, Agent S's ``agent.click``: ``SCREEN_ACTIONS``; not a bare
    ``click`` or ``type``, which a web agent reading accessibility trees also sends), any
    answer to a model that sees only screens (``GUI_MODELS``: UI-TARS, CogAgent...), and
    a structured answer that names
    its screenshot (``"next_obs": "screenshot 1920x1080 sha1:..."``) beside declared bytes
    larger than its own (its own bytes and one image); and a computer-use tool's screen
    described in words beside the declared bytes of its image (the words and one image). Eighteen of the
    forty-two healthy computer-use sessions of the hundred-and-forty-second blind batch
    (UI-TARS sending each screenshot's 1.7 MB, Agent S its 1.3 MB) were cut at their
    first or second action; four remain, an OSWorld agent whose answer is its
    accessibility tree's text beside the declared bytes of the tree and the screenshot
    together, which nothing tells apart from a log shipped cut beside its full size.

A window contradicted by its own measure
    A usage event whose ``input_tokens`` exceed the window (the event's
    ``context_window``, the table's, or the assumed one) says the figure is wrong:
    the provider accepted more than it is said to hold (a long-context variant such
    as a 1M-token beta under a 200,000-token model id, an unknown model with a large
    window, a runtime reporting a default). Estimating against it would cut every
    turn from then on, so both alerts stand down for the session until a later usage
    event names a window, or a model, that holds what it measured. The
    cost-ceiling guardrails are unaffected.

Results the runtime cuts, measured
    Many runtimes send the model only part of a large result (a shell's output cut
    at 30,000 characters, a page of records summarised) while the event declares
    the whole (``result_bytes``). The provider's next measure shows it: after a tail
    of at least 32 KiB (``CALIBRATE_BYTES``; less would be lost in the prompt's and
    the agent's own growth), the measure's growth over the tail's bytes at 3 a token
    is the share the model was sent. From then on the session's results are counted
    at **twice** that share (at least 2 %, at most all of them; ``kept`` in the
    state and in the alert's detail), whole again as soon as a measure shows them
    whole. A measure that did not grow (a compaction, the last figure sent again)
    teaches nothing. Two healthy paging sessions of a blind batch, pages of 296 KB
    declared and a few hundred tokens measured after each, were cut at their fourth
    page; one of them is no longer (the other is cut at its first page, before any
    measure).

Known false positives
    Payload bytes over-estimate tokens for prose-heavy results, so the cut can
    come slightly early there; that is the intended direction of error. A runtime
    that keeps only part of a large result (a truncated tool output counted by its
    full ``result_bytes``) is cut early for the same reason until its first
    measure after a large tail (above). A runtime that cuts one tool's results and
    sends another's whole is counted at the share its last measure showed, doubled:
    a whole result after a cut one can be under-counted until the next measure.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from itertools import islice
from typing import Annotated, Any, ClassVar, Self

from msgspec import Meta, Struct, field, structs

from ..canonical import payload_size
from ..events import Usage
from .base import Finding, ResultView, Signal, SignalConfig

OVERSIZED = 2
"""A result counted at more than this many windows was not sent whole to any model: the
runtime cut or summarised it (``ContextBudgetState.oversized``)."""
IMAGE_TOKENS = 1_600
"""Tokens an image block in a tool result is counted as: the most a vendor charges for
one image at its largest accepted size (about 1.15 megapixels: width × height / 750),
whatever the bytes of its base64."""
IMAGE_CHECK_BYTES = 16_384
"""Results larger than this are walked for image blocks (smaller ones hold no image
worth telling apart)."""
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image", "computer_screenshot"})
_WALK_NODES = 256


def sized_without_images(
    payload: Any, bytes_per_token: int, size: int, screenshot: bool = False
) -> int:
    """A structured result's size with each image block (``{"type": "image", ...}``, as
    computer-use and browser tools return screenshots) counted as :data:`IMAGE_TOKENS`
    rather than its bytes; ``size`` itself when it holds none, or when the walk would
    pass :data:`_WALK_NODES` containers (a large structure is counted by its bytes).
    ``screenshot``: the answer is a screenshot's even when no block says so (a
    computer-use tool's): its strings, then one image, at most ``size``."""
    images = 0
    text = 0  # the strings outside the images: what the model reads as text
    stack = [payload]
    nodes = 0
    while stack:
        node = stack.pop()
        nodes += 1
        if nodes > _WALK_NODES:
            return size
        if type(node) is dict:
            kind_of = node.get("type")
            if type(kind_of) is str and kind_of in _IMAGE_TYPES:  # any JSON may sit there
                images += 1
                continue
            items: Any = node.values()
        else:
            items = node
        for value in items:
            kind = type(value)
            if kind is str:
                text += len(value)
            elif kind is dict or kind is list:
                stack.append(value)
    if not images:
        if not screenshot:
            return size
        images = 1
    return min(size, text + images * IMAGE_TOKENS * bytes_per_token)


_COMPUTER_TOOL = re.compile(r"computer(?:_use(?:_preview)?)?(?:_\d{8})?")
"""The names the model vendors give their computer-use tools: ``computer``,
``computer_use_preview``, Anthropic's dated ``computer_20250124``."""


def _computer_tool(tool: str) -> bool:
    """A computer-use tool by its name (:data:`_COMPUTER_TOOL`): not any ``computer_*``,
    whose large answer may be text (a UI tree, a log)."""
    return _COMPUTER_TOOL.fullmatch(tool) is not None


SCREEN_ACTIONS = frozenset({
    "left_double", "left_single", "right_single", "hotkey", "long_press", "press_back",
    "press_home", "open_app", "swipe", "left_click", "right_click", "middle_click",
    "double_click", "triple_click", "left_click_drag", "mouse_move", "screenshot",
})
"""A GUI agent's own actions sent as tools (UI-TARS's ``left_double``, ``hotkey``; the
computer-use actions' names), and any action after ``agent.`` or ``pyautogui.`` (Agent
S's ``agent.click``, ``pyautogui.moveTo``): answered by the screen they leave, a screenshot. Not a
bare ``click``, ``type`` or ``scroll``, which a text agent's tools are also named (a web
agent's accessibility tree answers them)."""
_SCREEN_NAMESPACES = ("agent.", "pyautogui.")
GUI_MODELS = re.compile(
    r"(?i)(?:.*/)?(?:ui-?tars|cogagent|showui|aguvis|os-atlas|opencua|uground)[\w.:-]*"
    r"|(?:.*/)?computer[-_]use(?:[-_]preview)?[\w.:-]*"
)
"""Models that act on a screen and see only screenshots (UI-TARS, CogAgent, ShowUI,
Aguvis, OS-Atlas, OpenCUA, UGround; OpenAI's ``computer-use-preview``): an answer they get
sent by its size alone is a screenshot."""


def _gui_model(model: str | None) -> bool:
    return model is not None and len(model) <= 256 and GUI_MODELS.fullmatch(model) is not None


_IMAGE_DIGEST = ("phash:", "dhash:", "ahash:", "whash:", "pdq:")
"""Perceptual hashes, which only an image has: a digest named so is a screenshot's."""


def _screen_action(tool: str) -> bool:
    """Whether a tool is named as one GUI action (:data:`SCREEN_ACTIONS`; or a computer-use
    action after ``agent.`` or ``pyautogui.``: ``agent.click``)."""
    if tool in SCREEN_ACTIONS:
        return True
    # any action of a GUI agent's own namespace (`agent.click`, `pyautogui.moveTo`)
    return tool.startswith(_SCREEN_NAMESPACES) and len(tool) <= 64


def _names_screenshot(payload: Any) -> bool:
    """Whether a structured answer says it came with a screenshot: a key that names one
    (``screenshot_sha256``) or a short string that opens with the word (``"next_obs":
    "screenshot 1920x1080 sha1:..."``), among its first items."""
    if type(payload) is not dict:
        return False
    for key, value in islice(payload.items(), 16):
        if type(key) is str and "screenshot" in key.lower():
            return True
        if type(value) is str and len(value) <= 256 and value[:10].lower() == "screenshot":
            return True
    return False


PRESSURE = "context-pressure"
CUT = "context-budget"
ASSUMED_WINDOW = 128_000
CONTRADICTED = -1
"""``ContextBudgetState.window`` once a usage event measured more input than the window
holds: the figure is wrong, and the estimate stands down until a usage event names a
window (or a model) that holds its input."""
BYTES_PER_TOKEN = 3
KEPT_WHOLE = 1000
"""``ContextBudgetState.kept`` (per mille) of a runtime that sends its results whole."""
KEPT_FLOOR = 20
"""The least share (per mille) of the results' bytes counted after a measure showed less."""
CALIBRATE_BYTES = 32_768
"""Bytes of results since the last measure from which the next measure tells how much of
them the model was sent (fewer: the rest of a measure's growth, the agent's own text and
the prompt, would dwarf them)."""

Fraction = Annotated[float, Meta(gt=0, le=1)]


class ModelTier(Struct, kw_only=True, forbid_unknown_fields=True):
    match: str
    tier: str


class ModelWindow(Struct, kw_only=True, forbid_unknown_fields=True):
    match: str
    tokens: Annotated[int, Meta(ge=1)]


DEFAULT_MODEL_WINDOWS = [
    # The providers' published context windows of the common families: a model the table
    # names is not cut at 95 % of an assumed 128,000 tokens it does not have. A usage
    # event's own context_window wins over this table.
    # First match wins: the narrower variants come first. Image-generation variants
    # take far less than their families; guessing small costs an early warning only.
    ModelWindow(match="*-image*", tokens=32_768),
    ModelWindow(match="gpt-5*chat*", tokens=128_000),
    ModelWindow(match="claude-*", tokens=200_000),
    ModelWindow(match="gpt-4.1*", tokens=1_047_576),
    # GPT-5's 400,000-token window holds up to 128,000 of output: 272,000 is what a
    # request may send, and the cut guards the request.
    ModelWindow(match="gpt-5*", tokens=272_000),
    ModelWindow(match="gpt-4o*", tokens=128_000),
    ModelWindow(match="o3*", tokens=200_000),
    ModelWindow(match="o4-mini*", tokens=200_000),
    ModelWindow(match="gemini-2.5-*", tokens=1_048_576),
    ModelWindow(match="gemini-3*", tokens=1_048_576),
]
DEFAULT_MODEL_TIERS = [
    ModelTier(match="claude-haiku-*", tier="small"),
    ModelTier(match="*flash-lite*", tier="small"),
    ModelTier(match="gemini-3.1-flash*", tier="small"),
    ModelTier(match="gemini-2.5-flash*", tier="small"),
    ModelTier(match="claude-sonnet-*", tier="mid"),
    ModelTier(match="gemini-3.5-flash*", tier="mid"),
    ModelTier(match="gemini-2.5-pro*", tier="mid"),
    ModelTier(match="claude-opus-*", tier="frontier"),
    ModelTier(match="gemini-3.*-pro*", tier="frontier"),
    ModelTier(match="gemini-3.[678]-flash*", tier="frontier"),
]


class ContextBudgetConfig(SignalConfig, kw_only=True, forbid_unknown_fields=True):
    hard_ceiling: Fraction = 0.95
    default_threshold: Fraction = 0.85
    tiers: dict[str, Fraction] = field(
        default_factory=lambda: {"frontier": 0.85, "mid": 0.65, "small": 0.35}
    )
    model_tiers: list[ModelTier] = field(default_factory=lambda: list(DEFAULT_MODEL_TIERS))
    model_windows: list[ModelWindow] = field(default_factory=lambda: list(DEFAULT_MODEL_WINDOWS))
    assumed_window: Annotated[int, Meta(ge=1)] = ASSUMED_WINDOW
    bytes_per_token: Annotated[int, Meta(ge=1, le=16)] = BYTES_PER_TOKEN
    cut_unmeasured: bool = False
    """Whether to cut a turn on the assumed window before the session's first measure
    (no usage event has named a window or measured ``input_tokens``): the results' bytes
    alone against a guessed window. Off: such an estimate only warns
    (``context-pressure``)."""

    def validate(self) -> None:
        for rule in self.model_tiers:
            if rule.tier not in self.tiers:
                raise ValueError(
                    f"model_tiers: tier {rule.tier!r} (for {rule.match!r}) is not one of "
                    f"the tiers: {', '.join(sorted(self.tiers))}"
                )
        for tier, value in self.tiers.items():
            if value > self.hard_ceiling:
                raise ValueError(
                    f"tiers.{tier}: {value} is above hard_ceiling {self.hard_ceiling}"
                )

    def resolved(self) -> Self:
        config = super().resolved()
        # The bound is exclusive (gt=0), so it cannot be clamped onto: a floor instead.
        if config.hard_ceiling < 0.01:
            return structs.replace(config, hard_ceiling=0.01)
        return config


class ContextBudgetState(Struct, tag=CUT, gc=False, omit_defaults=True):
    measured: int = 0
    pending_bytes: int = 0
    kept: int = KEPT_WHOLE
    """Per mille of the results' bytes counted: what the last measure after a large tail
    showed the model was sent (doubled), for a runtime that keeps results out of the
    context or cuts them."""
    window: int = 0  # 0: not known yet (the assumed window applies); -1: CONTRADICTED
    threshold: float = 0.0  # 0: not known yet (the default applies)
    model: str | None = None
    pressure_latched: bool = False
    cut_latched: bool = False
    oversized: bool = False
    """A result since the last measure was counted at more than ``OVERSIZED`` windows: what
    the model was sent of it is unknown until the next measure."""


class ContextBudget(Signal):
    id: ClassVar[str] = CUT
    severity = "critical"
    scope = "turn"
    guardrail: ClassVar[str] = "context_budget"
    policy_table: ClassVar[str] = "context_budget"
    State = ContextBudgetState
    Config = ContextBudgetConfig
    alert_ids = (PRESSURE, CUT)
    needs_fingerprint = False
    needs_result_size = True

    config: ContextBudgetConfig

    def __init__(self, config: SignalConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.hard = cfg.hard_ceiling
        self.cut_unmeasured = cfg.cut_unmeasured
        self.default_threshold = cfg.default_threshold
        self.bytes_per_token = cfg.bytes_per_token
        self._tier_cache: dict[str, tuple[float, int]] = {}

    def _model_facts(self, model: str) -> tuple[float, int]:
        """(threshold, window or 0) for a model id; cached, bounded."""
        facts = self._tier_cache.get(model)
        if facts is not None:
            return facts
        threshold = self.default_threshold
        for rule in self.config.model_tiers:
            if fnmatch.fnmatchcase(model, rule.match):
                threshold = float(self.config.tiers.get(rule.tier, threshold))
                break
        window = 0
        for sized in self.config.model_windows:
            if fnmatch.fnmatchcase(model, sized.match):
                window = sized.tokens
                break
        facts = (threshold, window)
        if len(self._tier_cache) >= 1024:  # bounded: model names come from untrusted input
            self._tier_cache.clear()
        self._tier_cache[model] = facts
        return facts

    def on_usage(self, state: ContextBudgetState, event: Usage) -> Finding | None:
        if event.model is not None and event.model != state.model:
            state.model = sys.intern(event.model)  # one copy across the fleet
            state.threshold, window = self._model_facts(event.model)
            state.window = window  # the window is the model's: unknown (0) for one not listed
        if event.context_window:
            state.window = event.context_window
        measured = event.input_tokens
        if measured is not None:
            pending = state.pending_bytes
            if pending >= CALIBRATE_BYTES and measured > state.measured:
                # The provider measured what the model was sent after this tail of
                # results: a runtime that keeps them out of the context, or cuts them
                # (a 296 KB page of records declared, 2,600 tokens more measured), shows it
                # here. Counted from now on at twice the share it showed (an over-count
                # costs an early compaction, an under-count the overflow), whole again
                # as soon as a measure shows them whole. Not from a measure that did not
                # grow: the context shrank (a compaction) or the figure is the last one
                # sent again; either says nothing of the results.
                grown = (measured - state.measured) * self.bytes_per_token
                state.kept = max(KEPT_FLOOR, min(KEPT_WHOLE, 2 * KEPT_WHOLE * grown // pending))
            state.measured = measured
            state.pending_bytes = 0
            if state.oversized:
                state.oversized = False
        window = state.window
        if window >= 0 and state.measured > (window or self.config.assumed_window):
            # The provider took more than the window said to hold it (a long-context
            # variant, a window reported wrong): no estimate against that figure, and a
            # window named again (a model's, an event's) only if it holds what was measured.
            state.window = CONTRADICTED
        return None

    def on_turn_start(self, state: ContextBudgetState) -> Finding | None:
        state.pressure_latched = False
        state.cut_latched = False
        return None

    def on_result(self, state: ContextBudgetState, result: ResultView) -> Finding | None:
        size = result.size
        if size <= 0:
            return None
        if size > IMAGE_CHECK_BYTES:
            payload = result.event.result
            digest = result.event.result_digest
            # A computer-use tool answers every action with a screenshot, and so does a
            # GUI agent's action sent as a tool (`click`, `hotkey`, `agent.click`); a
            # perceptual hash is an image's digest.
            screenshot = _computer_tool(result.tool) or (
                digest is not None and digest.startswith(_IMAGE_DIGEST)
            )
            if type(payload) in (list, dict):
                # A screenshot's base64 is no text the model reads: an image costs what
                # its pixels cost (IMAGE_TOKENS), not its bytes. A summary of a
                # screenshot (its URL, its digest) beside the declared bytes is its
                # strings and one image (an accessibility tree sent beside it is text,
                # and counted). One that only names a screenshot is read so only when the
                # declared bytes are more than its own: then they are the image's.
                sized = sized_without_images(payload, self.bytes_per_token, size, screenshot)
                if (
                    sized == size and not screenshot and result.event.result_bytes
                    and _names_screenshot(payload)
                ):
                    own = payload_size(payload)
                    if own < size:
                        sized = min(size, own + IMAGE_TOKENS * self.bytes_per_token)
                size = sized
            elif payload is None:
                if screenshot or _screen_action(result.tool) or _gui_model(state.model):
                    # Sent by its size alone (a digest and result_bytes): an image all the same.
                    size = min(size, IMAGE_TOKENS * self.bytes_per_token)
            elif type(payload) is str and screenshot:
                # The screen described in words beside the declared bytes of its image.
                size = min(size, len(payload) + IMAGE_TOKENS * self.bytes_per_token)
        state.pending_bytes += size
        if state.cut_latched:
            return None
        window = state.window or self.config.assumed_window
        if (
            size * state.kept // (KEPT_WHOLE * self.bytes_per_token) > OVERSIZED * window
            and not state.oversized and window > 0
        ):
            # One result more than twice the whole window: no model could be sent it, so
            # the runtime cuts or summarises what it sends (a page of 2.5 MB declared,
            # 9,800 tokens measured after it). What it sent is unknown until the next
            # measure.
            state.oversized = True
        if window < 0:
            return None  # CONTRADICTED: no window to measure against
        used = state.measured + state.pending_bytes * state.kept // (KEPT_WHOLE * self.bytes_per_token)
        utilization = used / window
        if utilization >= self.hard and (
            self.cut_unmeasured or ((state.window or state.measured) and not state.oversized)
        ):
            # (A window neither named nor measured against, before the session's first
            # measure, is two guesses: the model's window and what the runtime sends it of
            # the results. They warn below; the cut waits for a measure or a window.)
            state.cut_latched = True
            state.pressure_latched = True
            return self._finding(state, CUT, utilization, used, window)
        threshold = state.threshold or self.default_threshold
        if utilization >= threshold and not state.pressure_latched:
            state.pressure_latched = True
            return self._finding(state, PRESSURE, utilization, used, window)
        return None

    def _finding(
        self, state: ContextBudgetState, signal: str, utilization: float, used: int, window: int
    ) -> Finding:
        assumed = state.window == 0
        window_text = f"{window:,} tokens" + (
            " (assumed: the model's window is unknown; send context_window on usage events)"
            if assumed
            else ""
        )
        detail: dict[str, Any] = {
            "utilization": round(utilization, 4),
            "estimated_tokens": used,
            "measured_tokens": state.measured,
            "unmeasured_bytes": state.pending_bytes,
            "kept_share": state.kept / KEPT_WHOLE,
            "window": window,
            "window_assumed": assumed,
            "model": state.model,
        }
        if signal == CUT:
            detail["hard_ceiling"] = self.hard
            return Finding(
                signal=CUT,
                severity="critical",
                scope="turn",
                reason=(
                    f"estimated context use {utilization:.0%} of {window_text} "
                    f"({state.measured:,} measured tokens plus {state.pending_bytes:,} unmeasured "
                    f"bytes of tool results{self._kept_text(state)}) reached the {self.hard:.0%} ceiling; the turn is cut so "
                    f"compaction can run first in the next turn. No reset is needed."
                ),
                guidance=(
                    "Your context is nearly full. Summarize what you have found so far and prefer "
                    "narrower reads over full dumps."
                ),
                detail=detail,
                guardrail="context_budget",
                enforced=True,
                escalates=False,
            )
        threshold = state.threshold or self.default_threshold
        detail["threshold"] = threshold
        return Finding(
            signal=PRESSURE,
            severity="warn",
            scope="turn",
            reason=(
                f"estimated context use {utilization:.0%} of {window_text} crossed the "
                f"model tier's compaction threshold {threshold:.0%} inside a turn; compaction "
                f"should run before the next model call."
            ),
            guidance=(
                "Your context is filling up. Keep tool output small: read only the parts you need."
            ),
            detail=detail,
            guardrail="context_budget",
        )

    @staticmethod
    def _kept_text(state: ContextBudgetState) -> str:
        if state.kept >= KEPT_WHOLE:
            return ""
        return f", counted at {state.kept / KEPT_WHOLE:.0%}: the share the last measure showed the model was sent, doubled"

    def is_latched(self, state: ContextBudgetState) -> bool:
        return state.cut_latched
