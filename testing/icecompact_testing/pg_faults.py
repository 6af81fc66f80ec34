"""A PostgreSQL catalog's commit whose answer is lost, for tests: a TCP proxy in front of a real PostgreSQL server that
forwards the wire protocol both ways unchanged, except that it can drop a connection right after the server finished
a chosen statement's transaction, without passing the server's answer on.

That is the classic way a JDBC catalog's commit goes wrong: Iceberg's ``JdbcTableOperations`` swaps the table's
``metadata_location`` with one ``UPDATE iceberg_tables ... WHERE metadata_location = ?`` in autocommit; if the
connection drops after the server committed it, the client cannot tell whether the swap happened.

The proxy parses just enough of the protocol (https://www.postgresql.org/docs/current/protocol-message-formats.html):
the untyped start-up packets (SSLRequest / GSSENCRequest and their one-byte answers, StartupMessage), then typed
messages (type byte + int32 length). From the client it follows Parse (statement name -> SQL), Bind (portal ->
statement), Execute (portal) and simple Query, so that each CommandComplete from the server is matched to the SQL it
completes, the extended protocol's named, re-used prepared statements included. :meth:`PgFaultProxy.lose_answer_of_next`
arms the fault for the next matching statements (the ``after``-th onwards):

* a matching statement completes (CommandComplete ``UPDATE n``): its answer and everything after it is held back;
* the server's ReadyForQuery then says whether the work is committed: idle (``I``, autocommit: the implicit
  transaction committed at Sync) -> the connection is dropped, the held answer never reaches the client; in a
  transaction (``T``) -> the held answer is passed on and the fault waits for that transaction's ``COMMIT`` to
  complete, whose answer it drops the same way; failed (``E``) -> passed on, the fault stays armed.

:attr:`PgFaultProxy.faults_served` counts the answers dropped; :attr:`PgFaultProxy.log` holds each such statement
(SQL and text parameters: for Iceberg's commit the first is the new ``metadata_location``), and
:attr:`PgFaultProxy.completed` every statement the proxy saw complete (tag, statement). A connection whose client asks
for TLS and gets it is forwarded unparsed (tests connect without TLS).
"""

from __future__ import annotations

import collections
import re
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["PgFaultProxy", "Statement", "ICEBERG_COMMIT_SQL"]

#: Iceberg's JdbcCatalog commit of an existing table (JdbcUtil.V1_DO_COMMIT_TABLE_SQL / V0_DO_COMMIT_SQL).
ICEBERG_COMMIT_SQL = r"^\s*UPDATE\s+iceberg_tables\s+SET\s+metadata_location\b"

_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST = 80877103, 80877104, 80877102


@dataclass
class _Rule:
    pattern: re.Pattern[str]
    skip: int  # matching statements to let through first
    count: int  # answers still to drop
    before_drop: Callable[[], None] | None = None  # run once the statement committed, before its answer is dropped


class _Connection:
    """One client connection and its upstream connection: two pumps, the protocol state they share."""

    def __init__(self, proxy: PgFaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy, self.client, self.upstream = proxy, client, upstream
        self.lock = threading.Lock()
        self.statements: dict[str, str] = {}
        self.portals: dict[str, Statement] = {}
        self.executing: collections.deque[Statement] = collections.deque()
        self.single_byte_answers = 0  # SSLRequest / GSSENCRequest sent, one-byte answer not seen yet
        self.passthrough = False
        self.doomed: str | None = None  # None | "after-statement" | "await-commit" | "after-commit"
        self.doomed_statement = Statement("")
        self.doomed_rule: _Rule | None = None
        self.held: list[bytes] = []
        self.closed = False

    # client -> server -------------------------------------------------------------------------------------------
    def pump_client(self) -> None:
        buf = b""
        started = False
        try:
            while True:
                data = self.client.recv(65536)
                if not data:
                    break
                if self.passthrough:
                    self.upstream.sendall(buf + data)
                    buf = b""
                    continue
                buf += data
                out = bytearray()
                while True:
                    if not started:
                        if len(buf) < 8:
                            break
                        length, code = struct.unpack("!II", buf[:8])
                        if len(buf) < length:
                            break
                        packet, buf = buf[:length], buf[length:]
                        if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                            with self.lock:
                                self.single_byte_answers += 1
                        elif code != _CANCEL_REQUEST:
                            started = True  # StartupMessage: typed messages from here on
                        out += packet
                        continue
                    if len(buf) < 5:
                        break
                    kind, length = buf[:1], struct.unpack("!I", buf[1:5])[0]
                    if len(buf) < 1 + length:
                        break
                    body, message = buf[5:1 + length], buf[:1 + length]
                    buf = buf[1 + length:]
                    self._client_message(kind, body)
                    out += message
                if out:
                    self.upstream.sendall(bytes(out))
        except OSError:
            pass
        finally:
            self.close()

    def _client_message(self, kind: bytes, body: bytes) -> None:
        with self.lock:
            if kind == b"P":  # Parse: name, query, ...
                name, rest = _cstring(body)
                query, _ = _cstring(rest)
                self.statements[name] = query
            elif kind == b"B":  # Bind: portal, statement, format codes, parameters, ...
                portal, rest = _cstring(body)
                statement, rest = _cstring(rest)
                self.portals[portal] = Statement(self.statements.get(statement, ""), _bind_parameters(rest))
            elif kind == b"E":  # Execute: portal, max rows
                portal, _ = _cstring(body)
                self.executing.append(self.portals.get(portal, Statement("")))
            elif kind == b"Q":  # simple Query
                query, _ = _cstring(body)
                self.executing.append(Statement(query))

    # server -> client -------------------------------------------------------------------------------------------
    def pump_server(self) -> None:
        buf = b""
        try:
            while True:
                data = self.upstream.recv(65536)
                if not data:
                    break
                if self.passthrough:
                    self.client.sendall(buf + data)
                    buf = b""
                    continue
                buf += data
                out = bytearray()
                while buf:
                    with self.lock:
                        single = self.single_byte_answers > 0
                        if single:
                            self.single_byte_answers -= 1
                    if single:
                        answer, buf = buf[:1], buf[1:]
                        out += answer
                        if answer == b"S":  # TLS (or GSS) accepted: nothing to parse from here on
                            self.passthrough = True
                            out += buf
                            buf = b""
                        continue
                    if len(buf) < 5:
                        break
                    kind, length = buf[:1], struct.unpack("!I", buf[1:5])[0]
                    if len(buf) < 1 + length:
                        break
                    message, body = buf[:1 + length], buf[5:1 + length]
                    buf = buf[1 + length:]
                    verdict = self._server_message(kind, body, message)
                    if verdict == "drop":
                        if out:
                            self.client.sendall(bytes(out))
                        if self.doomed_rule is not None and self.doomed_rule.before_drop is not None:
                            try:
                                self.doomed_rule.before_drop()  # the client still waits for its answer
                            except Exception as e:  # noqa: BLE001 - reported to the test, the fault still served
                                self.proxy.hook_errors.append(e)
                        self.proxy._served(self.doomed_statement)
                        self.close()
                        return
                    if isinstance(verdict, bytes):
                        out += verdict
                if out:
                    self.client.sendall(bytes(out))
        except OSError:
            pass
        finally:
            self.close()

    def _server_message(self, kind: bytes, body: bytes, message: bytes) -> bytes | str | None:
        """What to pass on for one server message: the bytes, None (held back) or "drop" (drop the connection)."""
        with self.lock:
            if kind == b"C":  # CommandComplete
                tag = body.rstrip(b"\0").decode("utf-8", "replace")
                statement = self.executing.popleft() if self.executing else Statement("")
                self.proxy._completed(tag, statement)
                rule = self.proxy._take(statement.sql) if self.doomed is None and tag.startswith("UPDATE") else None
                if rule is not None:
                    self.doomed, self.doomed_statement, self.held = "after-statement", statement, [message]
                    self.doomed_rule = rule
                    return None
                if self.doomed == "await-commit" and tag == "COMMIT":
                    self.doomed, self.held = "after-commit", [message]
                    return None
            elif kind == b"Z":  # ReadyForQuery: the statements of this Sync / Query are done
                self.executing.clear()
                status = body[:1]
                if self.doomed in ("after-statement", "after-commit"):
                    if status == b"I":  # idle: committed (autocommit, or the COMMIT itself)
                        return "drop"
                    held, self.held = b"".join(self.held), []
                    if status == b"T" and self.doomed == "after-statement":
                        self.doomed = "await-commit"
                    else:  # the transaction failed: nothing committed, the fault stays armed
                        self.doomed = None
                        self.proxy._give_back(self.doomed_statement.sql)
                    return held + message
            if self.doomed in ("after-statement", "after-commit"):
                self.held.append(message)
                return None
            return message

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self.proxy._forget(self)


@dataclass(frozen=True)
class Statement:
    """A statement the client executed: its SQL and its bound parameters (text; None for NULL or binary)."""

    sql: str
    parameters: tuple[str | None, ...] = ()


def _bind_parameters(data: bytes) -> tuple[str | None, ...]:
    """The parameters of a Bind message after its portal and statement names: text ones decoded, binary ones None."""
    try:
        (n_codes,) = struct.unpack("!H", data[:2])
        codes = struct.unpack(f"!{n_codes}H", data[2:2 + 2 * n_codes])
        pos = 2 + 2 * n_codes
        (n_params,) = struct.unpack("!H", data[pos:pos + 2])
        pos += 2
        values: list[str | None] = []
        for i in range(n_params):
            (length,) = struct.unpack("!i", data[pos:pos + 4])
            pos += 4
            code = codes[0] if n_codes == 1 else (codes[i] if n_codes else 0)
            if length < 0:
                values.append(None)
                continue
            raw, pos = data[pos:pos + length], pos + length
            values.append(raw.decode("utf-8", "replace") if code == 0 else None)
        return tuple(values)
    except struct.error:
        return ()


def _cstring(data: bytes) -> tuple[str, bytes]:
    end = data.find(b"\0")
    if end < 0:
        return data.decode("utf-8", "replace"), b""
    return data[:end].decode("utf-8", "replace"), data[end + 1:]


class PgFaultProxy:
    """A PostgreSQL wire-protocol proxy on 127.0.0.1 in front of ``upstream_host:upstream_port`` (module docstring).
    Use as a context manager; point clients at :attr:`port`."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, int(upstream_port))
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._connections: set[_Connection] = set()
        self.faults_served = 0
        self.log: list[Statement] = []  # each statement whose answer was dropped
        self.completed: list[tuple[str, Statement]] = []  # (CommandComplete tag, statement) of each one completed
        self.connections_opened = 0
        self.hook_errors: list[BaseException] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, name="pg-fault-proxy", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def lose_answer_of_next(self, count: int = 1, *, sql: str = ICEBERG_COMMIT_SQL, after: int = 0,
                            before_drop: Callable[[], None] | None = None) -> None:
        """Drop the answer of the next ``count`` committed statements whose SQL matches ``sql`` (a regex, case
        insensitive), letting the first ``after`` matching ones through. ``before_drop``: called once each such
        statement committed, before the connection is dropped (while the client waits for the answer), e.g. another
        writer's commit landing in that window; an exception from it is recorded in :attr:`hook_errors`."""
        with self._lock:
            self._rules.append(_Rule(re.compile(sql, re.IGNORECASE), after, count, before_drop))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def pending(self) -> int:
        with self._lock:
            return sum(rule.count for rule in self._rules)

    def matching(self, sql: str = ICEBERG_COMMIT_SQL) -> list[str]:
        """The completion tags of the statements seen so far whose SQL matches ``sql``."""
        pattern = re.compile(sql, re.IGNORECASE)
        with self._lock:
            return [tag for tag, statement in self.completed if pattern.search(statement.sql)]

    # called by the connections ----------------------------------------------------------------------------------
    def _take(self, sql: str) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.count > 0 and rule.pattern.search(sql):
                    if rule.skip > 0:
                        rule.skip -= 1
                        return None
                    rule.count -= 1
                    return rule
            return None

    def _give_back(self, sql: str) -> None:
        with self._lock:
            for rule in self._rules:
                if rule.pattern.search(sql):
                    rule.count += 1
                    return

    def _served(self, statement: Statement) -> None:
        with self._lock:
            self.faults_served += 1
            self.log.append(statement)

    def _completed(self, tag: str, statement: Statement) -> None:
        with self._lock:
            self.completed.append((tag, statement))

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.discard(connection)

    # the server -------------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(self, client, upstream)
            with self._lock:
                self._connections.add(connection)
                self.connections_opened += 1
            threading.Thread(target=connection.pump_client, name="pg-proxy-c2s", daemon=True).start()
            threading.Thread(target=connection.pump_server, name="pg-proxy-s2c", daemon=True).start()

    def start(self) -> PgFaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the proxy's thread
        except OSError:
            pass
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()

    def __enter__(self) -> PgFaultProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
