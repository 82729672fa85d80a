"""``streamguard bridge``: parse the settings, run the bridge, map failures to exit codes.

Exit codes as ``streamguard run``: 0 after a clean shutdown, 1 when it cannot
start or fails while running, 2 on a configuration error.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from ..kafka.config import ConfigError
    from .config import BridgeConfig

    try:
        config = BridgeConfig.from_env_and_args(argv)
    except ConfigError as exc:
        print(f"streamguard bridge: {exc}", file=sys.stderr)
        return 2
    from .bridge import run_bridge

    try:
        asyncio.run(run_bridge(config))
    except SystemExit as exc:
        return int(exc.code or 0)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        print(f"streamguard bridge: {exc!r}", file=sys.stderr)
        return 1
    return 0
