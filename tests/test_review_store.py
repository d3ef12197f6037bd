"""The review store keeps every note, on SQLite and on a real PostgreSQL server alike.

The PostgreSQL tests need a server: `.ci/run` starts one and sets CPDECOMP_TEST_POSTGRES_URL.
Under CI (CI=true) a missing URL fails them; elsewhere they are skipped.
"""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from ci_policy import environment_url, unavailable
from psycopg import sql

from cpdecomp.app import reviews
from cpdecomp.app.reviews import ReviewStore
from cpdecomp.core.errors import CpdecompError


def require_postgres_url() -> str:
    """The test server's URL; fails under CI without one, skips elsewhere."""
    return environment_url()


def in_schema(url: str, schema: str) -> str:
    """`url` with a search path, so that the store's tables go into `schema`."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode({"options": f"-csearch_path={schema}"})]))
    return urlunsplit(parts._replace(query=query))


def fresh_schema(url: str) -> Iterator[str]:
    """A URL whose tables go into a new, empty schema, dropped afterwards: tests run in
    parallel on one database."""
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield in_schema(url, schema)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return require_postgres_url()


@pytest.fixture
def postgres_location(postgres_url: str) -> Iterator[str]:
    yield from fresh_schema(postgres_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store keeps its events, on each back end."""
    if request.param == "sqlite":
        return str(tmp_path / "nested" / "reviews.sqlite3")
    return request.getfixturevalue("postgres_location")


def execute(location: str, *statements: str) -> list[tuple]:
    """Run trusted SQL of the test's own on the store's database; rows of the last statement."""
    if location.startswith("postgresql://"):
        with psycopg.connect(location) as connection:
            rows: list[tuple] = []
            for statement in statements:
                cursor = connection.execute(statement)  # type: ignore[arg-type]
                rows = cursor.fetchall() if cursor.description else []
            return rows
    with sqlite3.connect(location) as connection:
        rows = []
        for statement in statements:
            rows = connection.execute(statement).fetchall()
        return rows


def test_reviews_are_an_append_only_history(location: str) -> None:
    store = ReviewStore(location)
    store.record("k1", "P1", "reviewed", note="looked", reviewer="A")
    store.record("k1", "P1", "reopened", note="again")
    store.record("k1", "P2", "reviewed")
    store.record("k2", "P1", "reviewed", note="other dataset")
    assert [e.status for e in store.history("k1", "P1")] == ["reviewed", "reopened"]
    assert store.history("k1", "P1")[0].note == "looked"
    assert store.history("k1", "P1")[0].reviewer == "A"
    latest = store.latest("k1")
    assert latest["P1"].status == "reopened" and latest["P2"].status == "reviewed"
    assert [e.note for e in store.history("k2")] == ["other dataset"]
    assert store.history("k3") == []


def test_an_event_reads_back_as_it_was_recorded(location: str) -> None:
    store = ReviewStore(location)
    hostile = "'); DROP TABLE review_events; -- ünïcode ✓ %s {} \\ \"q\""
    written = store.record("k", hostile, "reviewed", note=hostile, reviewer=hostile,
                           label=hostile)
    assert store.history("k") == [written]
    assert written.created_at.endswith("+00:00")
    assert ReviewStore(location).latest("k")[hostile] == written


def test_notes_and_names_are_trimmed_to_their_limits(location: str) -> None:
    store = ReviewStore(location)
    event = store.record("k", "P1", "reviewed", note="  " + "x" * 5000, reviewer="y" * 300)
    assert len(event.note) == reviews.MAX_NOTE and len(event.reviewer) == 200
    assert store.history("k") == [event]


def test_reviews_survive_a_new_store_and_the_schema_version_is_kept(location: str) -> None:
    ReviewStore(location).record("k", "P9", "reviewed", note="before restart")
    assert ReviewStore(location).latest("k")["P9"].note == "before restart"
    if location.startswith("postgresql://"):
        rows = execute(location, "SELECT version FROM cpdecomp_schema")
    else:
        rows = execute(location, "PRAGMA user_version")
    assert rows == [(reviews.SCHEMA_VERSION,)]


def test_a_database_from_a_newer_cpdecomp_is_refused(location: str) -> None:
    ReviewStore(location).record("k", "P1", "reviewed")
    if location.startswith("postgresql://"):
        execute(location, "UPDATE cpdecomp_schema SET version = 99")
    else:
        execute(location, "PRAGMA user_version = 99")
    with pytest.raises(CpdecompError, match="schema version 99, newer than"):
        ReviewStore(location)


def test_bad_input_is_refused(location: str) -> None:
    store = ReviewStore(location)
    with pytest.raises(CpdecompError, match="status"):
        store.record("k", "P1", "deleted")  # type: ignore[arg-type]
    with pytest.raises(CpdecompError, match="needs a dataset"):
        store.record("", "P1", "reviewed")
    assert store.history("k") == []


def reject_notes_trigger(location: str) -> tuple[str, ...]:
    """SQL for a trigger that fails the event insert (after the dataset's row was added)."""
    if location.startswith("postgresql://"):
        return (
            "CREATE FUNCTION reject_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.note LIKE 'reject%' THEN RAISE EXCEPTION 'rejected %', NEW.note; END IF; "
            "RETURN NEW; END $$",
            "CREATE TRIGGER reject_note BEFORE INSERT ON review_events FOR EACH ROW "
            "EXECUTE FUNCTION reject_note()",
        )
    return ("CREATE TRIGGER reject_note BEFORE INSERT ON review_events "
            "WHEN NEW.note LIKE 'reject%' BEGIN SELECT RAISE(ABORT, 'rejected'); END",)


def test_a_failed_write_leaves_nothing_behind_and_quotes_no_note(location: str) -> None:
    store = ReviewStore(location)
    execute(location, *reject_notes_trigger(location))
    with pytest.raises(CpdecompError, match="not saved") as refused:
        store.record("k", "P-secret-id", "reviewed", note="reject: private note")
    assert "private note" not in str(refused.value)
    assert "P-secret-id" not in str(refused.value)
    assert store.history("k") == []
    assert execute(location, "SELECT COUNT(*) FROM datasets") == [(0,)]


def append_notes(location: str, writer: int, count: int,
                 start: threading.Barrier | None = None) -> None:
    """One clinician's session: its own store, `count` notes on the same case."""
    store = ReviewStore(location)
    if start is not None:
        start.wait(timeout=30)
    for i in range(count):
        store.record("shared", "P1", "reviewed" if i % 2 else "reopened",
                     note=f"writer {writer} note {i}", reviewer=f"clinician {writer}")


def test_concurrent_sessions_on_one_case_lose_no_note(location: str) -> None:
    ReviewStore(location)  # the schema exists before the sessions start
    threads, processes, count = 6, 2, 15
    start = threading.Barrier(threads)
    # Threads, as Streamlit serves sessions; processes, as dashboard replicas would.
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=append_notes, args=(location, threads + p, count))
               for p in range(processes)]
    for worker in workers:
        worker.start()
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(append_notes, location, t, count, start)
                       for t in range(threads)]:
            future.result()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    history = ReviewStore(location).history("shared", "P1")
    expected = {f"writer {w} note {i}" for w in range(threads + processes) for i in range(count)}
    assert sorted(e.note for e in history) == sorted(expected)
    # Each session's own notes stay in the order it wrote them.
    for w in range(threads + processes):
        mine = [e.note for e in history if e.reviewer == f"clinician {w}"]
        assert mine == [f"writer {w} note {i}" for i in range(count)]
    assert ReviewStore(location).latest("shared")["P1"] == history[-1]


def test_nothing_about_a_review_reaches_the_logs(location: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = ReviewStore(location)
    store.record("k", "MARKER-ID-7731", "reviewed", note="MARKER-NOTE-7731",
                 reviewer="MARKER-NAME-7731")
    store.history("k")
    assert "7731" not in caplog.text


# Where the events go: one setting, a path or a URL.

def test_the_location_comes_from_the_environment(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(reviews.ENV_VAR, str(tmp_path / "x.sqlite3"))
    assert reviews.configured_location() == str(tmp_path / "x.sqlite3")
    assert ReviewStore().location == str(tmp_path / "x.sqlite3")
    monkeypatch.setenv(reviews.ENV_VAR, "  ")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if reviews.sys.platform.startswith("linux"):
        expected = tmp_path / "data" / "cpdecomp" / "reviews.sqlite3"
        assert reviews.configured_location() == str(expected) == str(reviews.default_path())


def test_a_postgresql_url_in_the_environment_selects_postgresql(
        postgres_location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(reviews.ENV_VAR, postgres_location)
    store = ReviewStore()
    store.record("k", "P1", "reviewed", note="shared queue")
    assert execute(postgres_location, "SELECT note FROM review_events") == [("shared queue",)]
    password = urlsplit(postgres_location).password
    assert password and password not in store.location and ":***@" in store.location


def test_an_unwritable_path_is_refused_with_the_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(CpdecompError, match=reviews.ENV_VAR):
        ReviewStore(blocker / "reviews.sqlite3")


def test_an_unknown_database_kind_is_refused() -> None:
    with pytest.raises(CpdecompError, match=r"'mysql' database.*postgresql://"):
        ReviewStore("mysql://user:pw@host/db")


# Passwords never appear in messages.

@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:s3cr%40t@db.example:5432/reviews?sslmode=require",
     "postgresql://u:***@db.example:5432/reviews?sslmode=require"),
    ("postgresql://db.example/reviews?user=u&password=s3cr%40t&sslmode=require",
     "postgresql://db.example/reviews?user=u&password=***&sslmode=require"),
    ("postgresql://u@db.example/reviews", "postgresql://u@db.example/reviews"),
    ("postgresql://u:@db.example/reviews", "postgresql://u:***@db.example/reviews"),
])
def test_redact_hides_the_password(url: str, shown: str) -> None:
    assert reviews.redact(url) == shown


def closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("make_url", [
    lambda: f"postgresql://cpdecomp:Pw-Secret-42@127.0.0.1:{closed_port()}/reviews",
    lambda: "postgresql://cpdecomp:Pw-Secret-42@127.0.0.1:notaport/reviews",
    lambda: f"postgresql://127.0.0.1:{closed_port()}/reviews?password=Pw-Secret-42&bogus=1",
])
def test_a_connection_error_does_not_show_the_password(make_url) -> None:
    with pytest.raises(CpdecompError, match="cannot open the review database") as refused:
        ReviewStore(make_url())
    assert "Pw-Secret-42" not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_a_wrong_password_is_refused_without_showing_it(postgres_url: str) -> None:
    parts = urlsplit(postgres_url)
    wrong = urlunsplit(parts._replace(
        netloc=f"{parts.username}:Wrong-Pw-981@{parts.hostname}:{parts.port}"))
    with pytest.raises(CpdecompError, match="password authentication failed") as refused:
        ReviewStore(wrong)
    assert "Wrong-Pw-981" not in str(refused.value) and ":***@" in str(refused.value)


LIMITED_URL_VAR = "CPDECOMP_TEST_POSTGRES_LIMITED_URL"


def test_a_role_with_only_select_and_insert_can_review(postgres_location: str) -> None:
    """A hospital's role for the dashboard need not own the tables: once they exist (made by
    an owner), SELECT and INSERT are enough to open the store, read and record."""
    limited = environment_url(LIMITED_URL_VAR)
    owner = ReviewStore(postgres_location)  # creates the tables in the test's schema
    owner.record("k", "P1", "reviewed", note="by the owner")
    schema = dict(parse_qsl(urlsplit(postgres_location).query))["options"].split("=")[1]
    role = urlsplit(limited).username
    execute(postgres_location,
            f"GRANT USAGE ON SCHEMA {schema} TO {role}",
            f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    clinician = ReviewStore(in_schema(limited, schema))
    clinician.record("k", "P1", "reopened", note="by the clinician")
    assert [e.note for e in clinician.history("k", "P1")] == ["by the owner", "by the clinician"]


def test_a_database_that_went_away_is_not_waited_for_on_every_page(
        postgres_location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the server could not be reached, reads fail at once for a while (pages keep
    answering), then the store tries the server again; a database that answers is unaffected."""
    from cpdecomp.app.reviews import postgres

    store = ReviewStore(postgres_location)
    attempts = []
    real_connect = psycopg.connect

    def counted(*args, **kwargs):
        attempts.append(args[0])
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(postgres.psycopg, "connect", counted)
    parts = urlsplit(postgres_location)  # the same server on a port where nothing listens
    gone = urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.port}", ":1")))
    with pytest.raises(CpdecompError, match="cannot open the review database"):
        ReviewStore(gone)
    away = ReviewStore.__new__(ReviewStore)
    away._backend = postgres.PostgresBackend.__new__(postgres.PostgresBackend)
    away._backend.__dict__.update(store._backend.__dict__, _url=gone)
    for _ in range(3):
        with pytest.raises(CpdecompError, match="cannot read reviews"):
            away.history("k")
    assert len(attempts) == 1  # one try, then fast failures
    assert store.history("k") == []  # the database that answers still does
    postgres._POOLS[gone].unreachable_until = 0.0  # the back-off has passed
    with pytest.raises(CpdecompError, match="cannot read reviews"):
        away.history("k")
    assert len(attempts) == 2


def connection_limit(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user").fetchone()
    return int(row[0]) if row else -1


def test_a_role_at_its_connection_limit_waits_and_32_sessions_lose_no_write(
        postgres_location: str) -> None:
    """32 sessions write at once through a role with CONNECTION LIMIT 20 of which other
    clients hold all but two: the store's pool (4 connections a process) meets "too many
    connections", waits for its own connections instead of failing, and does not take the
    busy server for a down one. Every one of the 960 writes is there."""
    from cpdecomp.app.reviews import postgres

    limited = environment_url(LIMITED_URL_VAR)
    limit = connection_limit(limited)
    if not 0 < limit <= 20:
        unavailable(f"the role of {LIMITED_URL_VAR} has connection limit {limit}, not 1-20 "
                    "(.ci/run gives it 20)")
    ReviewStore(postgres_location)
    schema = dict(parse_qsl(urlsplit(postgres_location).query))["options"].split("=")[1]
    role = urlsplit(limited).username
    execute(postgres_location, f"GRANT USAGE ON SCHEMA {schema} TO {role}",
            f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    location = in_schema(limited, schema)
    others = [psycopg.connect(limited) for _ in range(limit - 2)]  # other replicas, tools
    try:
        sessions, count = 32, 30
        start = threading.Barrier(sessions)
        failures: list[str] = []

        def session(writer: int) -> None:
            store = ReviewStore(location)  # as each session asks for the shared store
            start.wait(timeout=60)
            for i in range(count):
                try:
                    store.record("busy", f"P{writer}", "reviewed", note=f"{writer}-{i}")
                except CpdecompError as error:
                    failures.append(str(error))

        with ThreadPoolExecutor(sessions) as pool:
            for future in [pool.submit(session, w) for w in range(sessions)]:
                future.result()
        assert failures == [], (len(failures), failures[:3])
        assert postgres._POOLS[location].unreachable_until == 0.0
    finally:
        for connection in others:
            connection.close()
    notes = [e.note for e in ReviewStore(location).history("busy")]
    assert sorted(notes) == sorted(f"{w}-{i}" for w in range(sessions) for i in range(count))


def test_a_pooled_connection_the_server_dropped_is_replaced(postgres_location: str) -> None:
    """A server restart (here: the server ending the store's idle connections) costs no
    failed operation: a connection idle for a while is checked before it is reused."""
    from cpdecomp.app.reviews import postgres

    store = ReviewStore(postgres_location)
    store.record("k", "P1", "reviewed", note="before")
    pool = postgres._POOLS[postgres_location]
    pool._idle = [(connection, since - postgres.CHECK_AFTER_IDLE - 1)
                  for connection, since in pool._idle]
    pids = ", ".join(str(connection.info.backend_pid) for connection, _ in pool._idle)
    assert pids
    execute(postgres_location, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE pid IN ({pids})")
    store.record("k", "P1", "reopened", note="after")
    assert [e.note for e in store.history("k")] == ["before", "after"]


# The SQLite file: private, and readable when it cannot be written.

def test_the_sqlite_database_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Notes and patient ids are in it: mode 0600 (it was 0644 under the usual umask), in a
    new folder of mode 0700, whatever the umask."""
    import os
    import stat

    path = tmp_path / "new-folder" / "reviews.sqlite3"
    previous = os.umask(0o022)
    try:
        ReviewStore(path).record("k", "P1", "reviewed", note="private")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ReviewStore(path).latest("k")["P1"].note == "private"


READ_AS_ANOTHER_USER = """
import sys
from cpdecomp.app.reviews import ReviewStore
from cpdecomp.core.errors import CpdecompError
store = ReviewStore(sys.argv[1])
print([e.note for e in store.history("k")])
try:
    store.record("k", "P1", "reopened")
except CpdecompError as error:
    print(error)
"""


def test_a_read_only_database_still_shows_its_reviews(tmp_path: Path) -> None:
    """A database the dashboard may not write (a read-only volume, another owner's file) opens
    and shows its reviews; only recording fails, saying why. (It failed to open at all.)

    As root, which writes any file, the folder is mounted read-only in a mount namespace of
    its own (a read-only volume); otherwise file and folder lose their write permission."""
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    folder = tmp_path / "volume"
    folder.mkdir()
    path = folder / "reviews.sqlite3"
    ReviewStore(path).record("k", "P1", "reviewed", note="kept")
    command = [sys.executable, "-c", READ_AS_ANOTHER_USER, str(path)]
    if os.geteuid() == 0:
        unshare = shutil.which("unshare")
        if unshare is None:
            unavailable("unshare (util-linux) is missing: no read-only mount to test with")
        command = [unshare, "--mount", "sh", "-c",
                   'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", str(folder),
                   *command]
    else:
        path.chmod(0o444)
        folder.chmod(0o555)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=root,
                              env={**os.environ, "PYTHONPATH": str(root)}, check=False)
    finally:
        folder.chmod(0o755)
        path.chmod(0o600)
    assert done.returncode == 0, done.stderr
    shown, refusal = done.stdout.strip().splitlines()
    assert shown == "['kept']"
    assert "the review was not saved" in refusal and "read-only" in refusal
