"""Review events in PostgreSQL: one queue shared by every clinician and every dashboard replica.

The tables are the SQLite store's, in the database the URL names (its default schema). The
schema is created on first use under an advisory lock, so replicas starting together do not
race, and its version is kept in `cpdecomp_schema`. Every value travels as a query parameter.

Each process keeps a few connections per database (`POOL_SIZE`), shared by its sessions'
threads: 32 sessions need not open 32 connections, and a role's connection limit is met by
waiting for a free connection, not by failing. Only a server that does not answer at all makes
operations fail at once for a while (`RETRY_AFTER`); one that answers "too many connections"
is busy, not down.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

try:
    import psycopg
except ModuleNotFoundError:  # without the [postgres] extra; PostgresBackend() names it
    psycopg = None  # type: ignore[assignment]

from cpdecomp.app.reviews.events import SCHEMA_VERSION, ReviewEvent
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.optional import require

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS cpdecomp_schema (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        version  integer NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS datasets (
        dataset_key text PRIMARY KEY,
        label       text NOT NULL DEFAULT '',
        first_seen  timestamptz NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS review_events (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        dataset_key text NOT NULL REFERENCES datasets (dataset_key),
        patient_id  text NOT NULL,
        status      text NOT NULL CHECK (status IN ('reviewed', 'reopened')),
        note        text NOT NULL DEFAULT '',
        reviewer    text NOT NULL DEFAULT '',
        created_at  timestamptz NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS review_events_case ON review_events (dataset_key, patient_id, id)",
)

SCHEMA_LOCK = 0x6370_6465_636F_6D70 & 0x7FFF_FFFF_FFFF_FFFF
"""Advisory lock key held while the schema is created ('cpdecomp' in ASCII, as a bigint)."""

CONNECT_TIMEOUT = 3
"""Seconds to wait for the server before saying it cannot be reached: every page that shows
reviews waits this long when the database is down."""

RETRY_AFTER = 30.0
"""Seconds after the server could not be reached during which operations fail at once instead
of each waiting for the server again (pages keep answering while the database is down)."""

POOL_SIZE = 4
"""Connections one process keeps open to one database, shared by its sessions. Replicas x
POOL_SIZE should stay within the role's connection limit; beyond it they wait (WAIT_FOR_SLOT)."""

WAIT_FOR_SLOT = 20.0
"""Seconds an operation waits for a connection when all are in use or the server has no more
for the role, before it fails with 'busy'."""

CHECK_AFTER_IDLE = 2.0
"""A connection idle longer than this is checked with an empty query before it is reused (the
server may have restarted or dropped it); busier ones are used as they are."""

SERVER_ANSWERED = re.compile(r"failed: [^\s:]+:  ")
"""libpq's form of an error the server sent ("...failed: FATAL:  too many connections ..."),
its severity word localised; errors of the network ("Connection refused", "timeout expired",
an unknown host) have no such part. Connection errors carry no SQLSTATE to tell them apart."""


# Without the [postgres] extra the module still imports (the store then refuses by name).
_OperationalError: type[Exception] = Exception if psycopg is None else psycopg.OperationalError


class DatabaseBusy(_OperationalError):  # type: ignore[valid-type,misc]
    """No connection became free within WAIT_FOR_SLOT seconds."""


def server_unreachable(error: psycopg.OperationalError) -> bool:
    """Whether a connection failed because nothing answered (not a refusal by the server)."""
    return not isinstance(error, DatabaseBusy) and not SERVER_ANSWERED.search(str(error))


class ConnectionPool:
    """At most `size` open connections, lent to one thread at a time.

    A thread that finds all of them lent out, or whose new connection the server refuses as
    one too many, waits for one to come back. A connection that breaks is closed, not lent
    again.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection], size: int = POOL_SIZE) -> None:
        self._connect = connect
        self._size = size
        self.unreachable_until = 0.0
        self._idle: list[tuple[psycopg.Connection, float]] = []
        self._open = 0
        self._full_until = 0.0  # the server said "too many connections" until about then
        self._changed = threading.Condition()

    @contextmanager
    def connection(self, wait: float = WAIT_FOR_SLOT) -> Iterator[psycopg.Connection]:
        connection = self._take(time.monotonic() + wait)
        try:
            yield connection
        finally:
            self._give_back(connection)

    def _take(self, deadline: float) -> psycopg.Connection:
        while True:
            if time.monotonic() < self.unreachable_until:
                raise psycopg.OperationalError("the database did not answer a moment ago")
            with self._changed:
                while not self._idle and (self._open >= self._size
                                          or time.monotonic() < self._full_until):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DatabaseBusy("no database connection became free")
                    self._changed.wait(min(left, 0.25))
                if self._idle:
                    connection, since = self._idle.pop()
                else:
                    connection, since = None, 0.0
                    self._open += 1
            if connection is not None:
                if time.monotonic() - since < CHECK_AFTER_IDLE or self._alive(connection):
                    return connection
                self._forget(connection)
                continue
            try:
                return self._connect()
            except psycopg.OperationalError as error:
                unreachable = server_unreachable(error)
                if unreachable:
                    self.unreachable_until = time.monotonic() + RETRY_AFTER
                with self._changed:
                    self._open -= 1
                    # The server answered; with connections of ours open, the login works,
                    # so any refusal is one connection too many (English servers say so).
                    too_many = not unreachable and ("too many" in str(error) or self._open > 0)
                    if too_many and time.monotonic() < deadline:
                        # Busy, not down: wait for a connection of our own to come back, or
                        # for another client's to close.
                        self._full_until = time.monotonic() + 0.2
                        self._changed.notify_all()
                        continue
                    self._changed.notify_all()
                raise

    @staticmethod
    def _alive(connection: psycopg.Connection) -> bool:
        try:
            connection.execute("")
        except psycopg.Error:
            return False
        return True

    def _give_back(self, connection: psycopg.Connection) -> None:
        healthy = not connection.closed and not connection.broken and \
            connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if not healthy:
            self._forget(connection)
            return
        with self._changed:
            self._idle.append((connection, time.monotonic()))
            self._changed.notify()

    def _forget(self, connection: psycopg.Connection) -> None:
        try:
            connection.close()
        finally:
            with self._changed:
                self._open -= 1
                self._changed.notify()


_POOLS: dict[str, ConnectionPool] = {}
_POOLS_LOCK = threading.Lock()


def redact(url: str) -> str:
    """`url` with its password (in the user part or a `password=` parameter) replaced by ***."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user_part, _, hosts = netloc.rpartition("@")
        netloc = f"{user_part.partition(':')[0]}:***@{hosts}"
    query = "&".join(
        f"{name}=***" if name.lower() == "password" else piece
        for piece in parts.query.split("&") if piece
        for name in [piece.partition("=")[0]]
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _passwords(url: str) -> list[str]:
    """Every spelling of the URL's passwords that an error message could quote."""
    parts = urlsplit(url)
    found = [parts.password or ""]
    found += [value for name, value in parse_qsl(parts.query) if name.lower() == "password"]
    secrets = {spelling for password in found if password
               for spelling in (password, unquote(password))}
    return sorted(secrets, key=len, reverse=True)


class PostgresBackend:
    """A PostgreSQL database of review events; every write is one transaction."""

    def __init__(self, url: str, hint: str) -> None:
        require("psycopg", "a postgresql:// review database")
        self._url = url
        self._passwords = _passwords(url)
        self.description = redact(url)
        try:
            with self._transaction() as cursor:
                # Tables are created only when missing: a hospital's database role for the
                # dashboard may hold no more than SELECT and INSERT on them.
                if not self._tables_exist(cursor):
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    for statement in SCHEMA:
                        cursor.execute(statement)
                    cursor.execute("INSERT INTO cpdecomp_schema (version) VALUES (%s) "
                                   "ON CONFLICT (only_row) DO NOTHING", (SCHEMA_VERSION,))
                cursor.execute("SELECT version FROM cpdecomp_schema")
                row = cursor.fetchone()
                found = row[0] if row else SCHEMA_VERSION
        except (psycopg.Error, ValueError) as error:
            # Connection errors name the host, user and database (useful, and no secret), but
            # could quote a malformed URL whole: scrub the password from them.
            raise CpdecompError(f"cannot open the review database {self.description} "
                                f"({self._scrub(str(error).strip())}); {hint}") from None
        if found > SCHEMA_VERSION:
            raise CpdecompError(
                f"the review database {self.description} has schema version {found}, newer "
                f"than this cpdecomp's {SCHEMA_VERSION}; upgrade cpdecomp")

    @staticmethod
    def _tables_exist(cursor: psycopg.Cursor) -> bool:
        cursor.execute("SELECT to_regclass('cpdecomp_schema') IS NOT NULL "
                       "AND to_regclass('datasets') IS NOT NULL "
                       "AND to_regclass('review_events') IS NOT NULL")
        row = cursor.fetchone()
        return bool(row and row[0])

    def _scrub(self, text: str) -> str:
        """`text` on one line, without the URL's password."""
        text = " ".join(text.replace(self._url, self.description).split())
        for password in self._passwords:
            text = text.replace(password, "***")
        return text

    def _pool(self) -> ConnectionPool:
        # One pool per database and process, whichever store asked first: the sessions'
        # threads share it (and its memory that the server did not answer).
        with _POOLS_LOCK:
            pool = _POOLS.get(self._url)
            if pool is None:
                pool = _POOLS[self._url] = ConnectionPool(functools.partial(
                    psycopg.connect, self._url, connect_timeout=CONNECT_TIMEOUT,
                    application_name="cpdecomp", autocommit=True))
            return pool

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor]:
        # A pooled connection per operation, in its own transaction; one that breaks (a
        # server restart) is closed by the pool, so that costs one failed page at most.
        with self._pool().connection() as connection:
            with connection.transaction(), connection.cursor() as cursor:
                yield cursor

    def append(self, event: ReviewEvent, label: str) -> None:
        created_at = datetime.fromisoformat(event.created_at)
        try:
            with self._transaction() as cursor:
                cursor.execute(
                    "INSERT INTO datasets (dataset_key, label, first_seen) VALUES (%s, %s, %s) "
                    "ON CONFLICT (dataset_key) DO NOTHING",
                    (event.dataset_key, label, created_at))
                cursor.execute(
                    "INSERT INTO review_events (dataset_key, patient_id, status, note, reviewer, "
                    "created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                    (event.dataset_key, event.patient_id, event.status, event.note,
                     event.reviewer, created_at))
        except psycopg.Error as error:
            # A server's message can quote the failing row (note, patient id, name): give only
            # the kind of failure and its SQLSTATE code.
            raise CpdecompError(
                f"the review was not saved: the database {self.description} refused it "
                f"({type(error).__name__} {error.sqlstate or ''})".rstrip()) from None

    def events(self, dataset_key: str, patient_id: str | None) -> list[ReviewEvent]:
        query = ("SELECT dataset_key, patient_id, status, note, reviewer, created_at "
                 "FROM review_events WHERE dataset_key = %s")
        parameters: tuple[str, ...] = (dataset_key,)
        if patient_id is not None:
            query += " AND patient_id = %s"
            parameters += (patient_id,)
        try:
            with self._transaction() as cursor:
                cursor.execute(query + " ORDER BY id", parameters)
                rows = cursor.fetchall()
        except psycopg.Error as error:
            raise CpdecompError(f"cannot read reviews from {self.description} "
                                f"({type(error).__name__} {error.sqlstate or ''})") from None
        return [ReviewEvent(key, patient, status, note, reviewer,
                            created.astimezone(UTC).isoformat(timespec="seconds"))
                for key, patient, status, note, reviewer, created in rows]
