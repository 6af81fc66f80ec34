"""Storage and catalog faults for tests: an HTTP proxy in front of a real S3 endpoint or Iceberg REST catalog that
answers chosen requests with the errors they return in production (S3's ``500 InternalError`` / ``503 SlowDown``, a
REST commit whose answer is lost after it took effect) and forwards everything else unchanged.

Clients sign their requests for the proxy's address (the ``Host`` header), and the proxy forwards that header as it
is, so the endpoint checks the signature against the same host: no credentials pass through the proxy's code.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_S3_ERRORS = {
    500: ("InternalError", "We encountered an internal error, please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class _Rule:
    method: str
    path: re.Pattern[str]
    remaining: int
    status: int
    after_forward: bool = False  # the request reaches the server and takes effect; only its answer is lost


class S3FaultProxy:
    """``with S3FaultProxy(upstream) as proxy:`` then point clients at :attr:`endpoint`; :meth:`fail_next` arms a
    fault, :attr:`faults_served` and :attr:`forwarded` count what happened."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self.faults_served = 0
        self.forwarded = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, count: int, *, method: str = "GET", path: str = ".*", status: int = 500) -> None:
        """Answer the next ``count`` ``method`` requests whose path matches ``path`` (a regex) with S3's ``status``."""
        with self._lock:
            self._rules.append(_Rule(method, re.compile(path), count, status))

    def lose_answer_of_next(self, count: int, *, method: str = "POST", path: str = ".*", status: int = 503) -> None:
        """Forward the next ``count`` matching requests - they take effect - and answer them with ``status`` as a
        gateway does when the server's answer never came back (Iceberg's REST client raises
        ``CommitStateUnknownException`` for a commit answered 500/502/503/504)."""
        with self._lock:
            self._rules.append(_Rule(method, re.compile(path), count, status, after_forward=True))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def _fault_for(self, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.remaining > 0 and rule.method == method and rule.path.search(path):
                    rule.remaining -= 1
                    self.faults_served += 1
                    return rule
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                rule = proxy._fault_for(self.command, self.path.split("?", 1)[0])
                if rule is not None and not rule.after_forward:
                    self._fail(rule.status)
                    return
                upstream = http.client.HTTPConnection(*proxy._upstream, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    with proxy._lock:
                        proxy.forwarded += 1
                    if rule is not None:
                        self._fail(rule.status)
                        return
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

            def _fail(self, status: int) -> None:
                if self.path.startswith("/v1/"):  # an Iceberg REST catalog: its JSON error model
                    payload = json.dumps({"error": {"message": "injected: the server's answer was lost",
                                                    "type": "ServiceFailureException", "code": status}}).encode()
                    content_type = "application/json"
                else:
                    code, message = _S3_ERRORS[status]
                    payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                               f"<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>").encode()
                    content_type = "application/xml"
                self.send_response(status)
                self.send_header("Content-Type", content_type)
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
