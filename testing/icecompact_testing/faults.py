"""Storage and catalog faults for tests: an HTTP proxy in front of a real S3 endpoint or Iceberg REST catalog that
answers chosen requests with the failures they meet in production and forwards everything else unchanged:

* ``status``: S3's ``500 InternalError`` / ``503 SlowDown`` (a REST catalog's JSON error model under ``/v1/``),
  optionally with a ``Retry-After`` header (:meth:`S3FaultProxy.fail_next`, :meth:`S3FaultProxy.slow_down_next`);
* ``reset``: the connection is reset (TCP RST, no answer) before the request is forwarded
  (:meth:`S3FaultProxy.reset_next`), or ``lost_reset`` after it was forwarded and took effect;
* ``latency``: a delay before the request is forwarded (:meth:`S3FaultProxy.delay_next`);
* ``lost``: the request is forwarded and takes effect, its answer is replaced by a gateway's 5xx
  (:meth:`S3FaultProxy.lose_answer_of_next`).

A :class:`FaultSchedule` is a reproducible list of such faults, each fired at a request number or on the first
request whose path matches a regex, drawn from ``random.Random(seed)`` (:meth:`FaultSchedule.draw`) and armed with
:meth:`S3FaultProxy.install`; :attr:`S3FaultProxy.log` records which request got which fault.

Clients sign their requests for the proxy's address (the ``Host`` header), and the proxy forwards that header as it
is, so the endpoint checks the signature against the same host: no credentials pass through the proxy's code.
"""

from __future__ import annotations

import http.client
import io
import json
import random
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Sequence
from urllib.parse import urlsplit

_S3_ERRORS = {
    500: ("InternalError", "We encountered an internal error, please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


#: What a fault does: answer with an error, reset the connection (before / after forwarding), delay, lose the answer.
FAULT_KINDS = ("status", "reset", "lost_reset", "latency", "lost")


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` (:data:`FAULT_KINDS`); ``status`` for ``status``/``lost``; ``retry_after_s`` adds a
    ``Retry-After`` header (whole seconds) to a ``status`` answer; ``delay_s`` for ``latency``."""

    kind: str
    status: int = 500
    retry_after_s: int | None = None
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault kind must be one of {FAULT_KINDS}, not {self.kind!r}")
        if self.kind in ("status", "lost") and self.status not in _S3_ERRORS and self.status not in (502, 504):
            raise ValueError(f"unsupported fault status {self.status}")

    @property
    def after_forward(self) -> bool:
        """The request reaches the server and takes effect; only its answer is lost."""
        return self.kind in ("lost", "lost_reset")

    def describe(self) -> str:
        if self.kind == "status":
            return f"{self.status}" + (f"+Retry-After:{self.retry_after_s}" if self.retry_after_s is not None else "")
        if self.kind == "latency":
            return f"latency {self.delay_s:.2f}s"
        if self.kind == "lost":
            return f"lost answer ({self.status})"
        return self.kind


@dataclass(frozen=True)
class ScheduledFault:
    """``fault`` served ``count`` times: on requests numbered ``at_request`` or later (1-based, every request the
    proxy receives counts) that match ``method`` (``None``: any) and the regex ``path``."""

    fault: Fault
    at_request: int = 1
    method: str | None = None
    path: str = ".*"
    count: int = 1

    def describe(self) -> str:
        where = f"#{self.at_request}+" if self.at_request > 1 else "first"
        match = f"{self.method or '*'} {self.path}" if (self.method or self.path != ".*") else "any"
        return f"{self.fault.describe()} x{self.count} @ {where} {match}"


@dataclass(frozen=True)
class FaultSchedule:
    """A reproducible set of faults: the same ``seed`` and arguments of :meth:`draw` give the same schedule."""

    seed: int
    faults: tuple[ScheduledFault, ...]

    @classmethod
    def draw(cls, seed: int, kinds: Sequence[str], *, faults: int = 3, requests: tuple[int, int] = (1, 40),
             targets: Sequence[tuple[str | None, str]] = ((None, ".*"),), max_count: int = 2,
             delay_s: tuple[float, float] = (0.2, 1.5), retry_after_s: tuple[int, int] = (1, 2)) -> FaultSchedule:
        """``faults`` faults drawn from ``random.Random(seed)``: each a kind of ``kinds`` (``reset``, ``slow_down``
        = 503 + ``Retry-After``, ``latency``, ``lost``, ``lost_reset``, ``500``, ``503``), fired on a request number
        in ``requests`` or, with even odds, on the first request matching one of ``targets`` ((method, path regex)
        pairs), 1 to ``max_count`` times."""
        rng = random.Random(seed)
        drawn: list[ScheduledFault] = []
        for _ in range(faults):
            kind = rng.choice(list(kinds))
            if kind == "reset":
                fault = Fault("reset")
            elif kind == "lost_reset":
                fault = Fault("lost_reset")
            elif kind == "slow_down":
                fault = Fault("status", 503, retry_after_s=rng.randint(*retry_after_s))
            elif kind == "latency":
                fault = Fault("latency", delay_s=round(rng.uniform(*delay_s), 3))
            elif kind == "lost":
                fault = Fault("lost", 503)
            elif kind in ("500", "503"):
                fault = Fault("status", int(kind))
            else:
                raise ValueError(f"unknown fault kind {kind!r}")
            count = 1 if fault.after_forward else rng.randint(1, max_count)
            method, path = rng.choice(list(targets))
            if rng.random() < 0.5:
                drawn.append(ScheduledFault(fault, at_request=rng.randint(*requests), method=method, path=path,
                                            count=count))
            else:
                drawn.append(ScheduledFault(fault, method=method, path=path, count=count))
        return cls(seed, tuple(drawn))

    def describe(self) -> list[str]:
        return [f.describe() for f in self.faults]


@dataclass
class _Rule:
    method: str | None
    path: re.Pattern[str]
    remaining: int
    fault: Fault
    at_request: int = 1


@dataclass(frozen=True)
class ServedFault:
    request: int  # the request's number at the proxy (1-based)
    method: str
    path: str
    fault: str


class _QuietServer(ThreadingHTTPServer):
    """A client that drops its connection (an SDK aborting a read it no longer needs) is not an error of the proxy's:
    no traceback on stderr for it."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class S3FaultProxy:
    """``with S3FaultProxy(upstream) as proxy:`` then point clients at :attr:`endpoint`; :meth:`fail_next` arms a
    fault, :attr:`faults_served` and :attr:`forwarded` count what happened."""

    def __init__(self, upstream: str, *, vend_s3_endpoint: str | None = None) -> None:
        """``vend_s3_endpoint`` (a proxy in front of an Iceberg REST catalog): the ``s3.endpoint`` the catalog vends
        in a table's ``config`` is replaced with this one. Iceberg's Java REST client gives a table's FileIO the
        table config over the client's own properties (as a server that vends credentials and endpoints wants), so
        without it Spark's S3FileIO would reach the store directly, past an S3 fault proxy."""
        self.vend_s3_endpoint = vend_s3_endpoint
        self.vended = 0  # answers whose vended endpoint was replaced
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self.faults_served = 0
        self.forwarded = 0
        self.requests = 0  # every request received (numbers the requests for :class:`ScheduledFault`)
        self.by_kind: Counter[str] = Counter()  # faults served per kind (``status`` split as ``status:503``)
        self.log: list[ServedFault] = []
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _arm(self, count: int, method: str | None, path: str, fault: Fault, at_request: int = 1) -> None:
        with self._lock:
            self._rules.append(_Rule(method, re.compile(path), count, fault, at_request))

    def fail_next(self, count: int, *, method: str | None = "GET", path: str = ".*", status: int = 500,
                  retry_after_s: int | None = None) -> None:
        """Answer the next ``count`` ``method`` requests (``None``: any method) whose path matches ``path`` (a regex)
        with S3's ``status``, with a ``Retry-After: retry_after_s`` header when given."""
        self._arm(count, method, path, Fault("status", status, retry_after_s=retry_after_s))

    def slow_down_next(self, count: int, *, method: str | None = "GET", path: str = ".*", retry_after_s: int = 1) -> None:
        """Answer the next ``count`` matching requests with ``503 SlowDown`` and ``Retry-After: retry_after_s``."""
        self._arm(count, method, path, Fault("status", 503, retry_after_s=retry_after_s))

    def reset_next(self, count: int, *, method: str | None = "GET", path: str = ".*", after_forward: bool = False) -> None:
        """Reset the connection (TCP RST, no answer) of the next ``count`` matching requests: before forwarding them,
        or with ``after_forward`` once the server answered (the request took effect; its answer is lost)."""
        self._arm(count, method, path, Fault("lost_reset" if after_forward else "reset"))

    def delay_next(self, count: int, *, method: str | None = "GET", path: str = ".*", seconds: float = 1.0) -> None:
        """Hold the next ``count`` matching requests ``seconds`` before forwarding them (a latency spike)."""
        self._arm(count, method, path, Fault("latency", delay_s=seconds))

    def lose_answer_of_next(self, count: int, *, method: str | None = "POST", path: str = ".*", status: int = 503) -> None:
        """Forward the next ``count`` matching requests - they take effect - and answer them with ``status`` as a
        gateway does when the server's answer never came back. Iceberg's REST client retries a 502/503/504 answer
        (any method, ``rest.client.max-retries``, honouring ``Retry-After``) and a commit answered 500/502/503/504
        that is not retried ends in ``CommitStateUnknownException``."""
        self._arm(count, method, path, Fault("lost", status))

    def install(self, schedule: FaultSchedule | Iterable[ScheduledFault]) -> None:
        """Arm every fault of ``schedule`` (the request numbers count from the proxy's start)."""
        faults = schedule.faults if isinstance(schedule, FaultSchedule) else tuple(schedule)
        for f in faults:
            self._arm(f.count, f.method, f.path, f.fault, f.at_request)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def pending(self) -> int:
        """Faults armed and not served yet."""
        with self._lock:
            return sum(rule.remaining for rule in self._rules)

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            self.requests += 1
            number = self.requests
            for rule in self._rules:
                if (rule.remaining > 0 and number >= rule.at_request and rule.method in (None, method)
                        and rule.path.search(path)):
                    rule.remaining -= 1
                    self.faults_served += 1
                    kind = rule.fault.kind
                    self.by_kind[f"status:{rule.fault.status}" if kind == "status" else kind] += 1
                    self.log.append(ServedFault(number, method, path, rule.fault.describe()))
                    return rule.fault
        return None

    def _revend(self, data: bytes) -> bytes:
        try:
            answer = json.loads(data)
        except ValueError:
            return data
        config = answer.get("config") if isinstance(answer, dict) else None
        if not isinstance(config, dict) or "s3.endpoint" not in config:
            return data
        config["s3.endpoint"] = self.vend_s3_endpoint
        with self._lock:
            self.vended += 1
        return json.dumps(answer).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy._fault_for(self.command, self.path.split("?", 1)[0])
                if fault is not None and fault.kind == "reset":
                    self._reset()
                    return
                if fault is not None and fault.kind == "status":
                    self._fail(fault.status, fault.retry_after_s)
                    return
                if fault is not None and fault.kind == "latency":
                    time.sleep(fault.delay_s)
                upstream = http.client.HTTPConnection(*proxy._upstream, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    with proxy._lock:
                        proxy.forwarded += 1
                    if fault is not None and fault.kind == "lost_reset":
                        self._reset()
                        return
                    if fault is not None and fault.kind == "lost":
                        self._fail(fault.status)
                        return
                    if proxy.vend_s3_endpoint and self.path.startswith("/v1/") and response.status == 200 \
                            and not response.getheader("Content-Encoding"):
                        data = proxy._revend(data)
                    self.send_response(response.status, response.reason)
                    for key, value in response.getheaders():
                        # A HEAD answer's Content-Length is the object's size (its body is empty): keep it.
                        if key.lower() not in _HOP_BY_HOP and (key.lower() != "content-length" or self.command == "HEAD"):
                            self.send_header(key, value)
                    if self.command != "HEAD":
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()

            def _reset(self) -> None:
                """Close the connection with a TCP RST (SO_LINGER 0) and no answer, as a restarting endpoint does."""
                self.close_connection = True
                try:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.rfile.close()  # holds the socket open while it is
                    self.connection.close()
                except OSError:
                    pass
                self.wfile = io.BytesIO()  # the server flushes and closes it after the handler

            def _fail(self, status: int, retry_after_s: int | None = None) -> None:
                if self.path.startswith("/v1/"):  # an Iceberg REST catalog: its JSON error model
                    payload = json.dumps({"error": {"message": "injected: the server's answer was lost",
                                                    "type": "ServiceFailureException", "code": status}}).encode()
                    content_type = "application/json"
                else:
                    code, message = _S3_ERRORS.get(status, ("ServiceUnavailable", "Bad gateway."))
                    payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                               f"<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>").encode()
                    content_type = "application/xml"
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if retry_after_s is not None:
                    self.send_header("Retry-After", str(int(retry_after_s)))
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        return Handler

    def __enter__(self) -> S3FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
