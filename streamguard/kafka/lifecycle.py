"""The process around a consumer-group job: what ``streamguard run`` and ``streamguard bridge`` share.

Both jobs run until SIGTERM or SIGINT asks them to stop (then they checkpoint and
leave their group), and both turn a failure to start into one line on the log and
exit status 1, never a traceback. Both bound the digits of the integers their records
may hold (:func:`bound_integer_digits`). The job owns everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Awaitable
from typing import Protocol

from aiokafka.errors import KafkaConnectionError

from ..events import MAX_INT_DIGITS
from .topics import PartitionCountChanged, StartupError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Job(Protocol):
    """A long-running consumer-group job."""

    def run(self) -> Awaitable[None]: ...

    def request_stop(self) -> None: ...


def bound_integer_digits() -> None:
    """Refuse integers of more than :data:`~streamguard.events.MAX_INT_DIGITS` digits in
    every record this process decodes: converting one costs time quadratic in its digits
    (CPython's own default bound, 4,300, lets one record of them cost seconds)."""
    sys.set_int_max_str_digits(MAX_INT_DIGITS)


async def serve(job: Job, bootstrap_servers: str, log: logging.Logger) -> None:
    """Run ``job`` until SIGTERM/SIGINT; a job that cannot start exits with status 1.

    ``bootstrap_servers`` names the cluster in the message when no broker answers;
    ``log`` is the job's own logger.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    bound_integer_digits()
    # What exists now (modules, policy, clients' plumbing) lives as long as the
    # process: leave it out of every future collection, so that full passes scan
    # only what processing creates and stall the loop for less.
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    installed = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, job.request_stop)
            installed.append(signum)
    try:
        await job.run()
    except KafkaConnectionError as exc:
        # One sentence, as the other commands say it (the client's own message
        # lists resolved addresses, which says less).
        log.error(
            "cannot start: cannot reach the Kafka cluster at %s: no broker answered (%s); "
            "is it running, and are --bootstrap-servers and the security settings right?",
            bootstrap_servers,
            type(exc).__name__,
        )
        raise SystemExit(1) from None
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        raise SystemExit(1) from None
    except PartitionCountChanged as exc:
        # Said once, in one line: the job already logged how it stopped.
        log.error("stopped: %s", exc)
        raise SystemExit(1) from None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
