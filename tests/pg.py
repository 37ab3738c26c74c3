"""The PostgreSQL server the tests run against: find it, make throwaway databases and roles on it.

The server is named by KVREG_TEST_PG_URL, an admin URL such as
postgresql+psycopg://postgres@127.0.0.1:5433/postgres. `.ci/run` starts one; to run the
PostgreSQL half of the suite locally, start a throwaway server and export what it prints:

    python tests/pg.py start            # initdb + pg_ctl start in a temporary folder
    python tests/pg.py stop FOLDER

Both set the server up as `.ci/run` does: the `postgres` superuser logs in over loopback
without a password, every other role needs its password (tests/test_secrets.py relies on a
wrong password being refused).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = "KVREG_TEST_PG_URL"
PG_HBA = """\
local all all trust
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""


class PgServer:
    """A reachable server, through its admin URL (a superuser, or a role that may create databases)."""

    def __init__(self, admin_url: str):
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        self.admin_url = make_url(admin_url)
        # One admin connection kept open: a new one for each CREATE, ALTER and DROP DATABASE was a backend
        # started and ended three times a test database (21.7 ms wall and 23 ms of the server's CPU for the
        # three, 13.1 and 12.5 ms on the kept one).
        self.admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=2,
                                   pool_pre_ping=True, connect_args={"connect_timeout": 5})
        self.prefix = f"kvreg_test_{os.getpid()}_"
        self._version = None

    @property
    def version(self) -> int:
        """server_version_num, e.g. 150018."""
        if self._version is None:
            self._version = int(self.sql("SHOW server_version_num")[0][0])
        return self._version

    def sql(self, statement: str):
        """Run one statement outside a transaction (CREATE/DROP DATABASE need that); its rows, if any."""
        with self.admin.connect() as conn:
            result = conn.exec_driver_sql(statement)
            return result.fetchall() if result.returns_rows else []

    def url(self, database: str, user: str | None = None, password: str | None = None) -> str:
        """A URL for `database` on this server, as the admin role or as `user` with `password`."""
        u = self.admin_url.set(database=database)
        if user is not None:
            u = u.set(username=user, password=password)
        return u.render_as_string(hide_password=False)

    def create_database(self, template: str | None = None, owner: str | None = None) -> str:
        """A new database (empty, or a copy of `template`); returns its name."""
        name = self.prefix + secrets.token_hex(4)
        clause = f" TEMPLATE {template}" if template else ""
        if self.version >= 150000:
            # Copying the files beats WAL-logging every block (PostgreSQL 15's default) by 2-5x
            # for a database this small, most of which is the system catalogs.
            clause += " STRATEGY FILE_COPY"
        clause += f" OWNER {owner}" if owner else ""
        self.sql(f"CREATE DATABASE {name}{clause}")
        # JIT compiling the views' large plans costs seconds a query (15 s of a 15 s SELECT * FROM
        # procurement on a seeded registry, 0.02 s to run it): off for the test databases, whose
        # queries are all small. A setting of the database, so any server named by KVREG_TEST_PG_URL
        # gets it; CREATE DATABASE ... TEMPLATE does not copy it.
        self.sql(f"ALTER DATABASE {name} SET jit = off")
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending any connection a test left open to it."""
        if self.version >= 130000:
            self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            return
        self.sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        self.sql(f"DROP DATABASE IF EXISTS {name}")

    def seeded_template(self) -> str:
        """A database migrated, seeded and given its views by kvreg, for `CREATE DATABASE ... TEMPLATE`:
        copying it takes tens of milliseconds where migrating and seeding a new one takes ~0.4 s."""
        from kvreg.app.access import open_registry

        name = self.create_database()
        open_registry(self.url(name)).dispose()
        return name

    def create_role(self, name: str, password: str) -> None:
        self.sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")

    def drop_role(self, name: str) -> None:
        self.sql(f"DROP ROLE IF EXISTS {name}")

    def close(self) -> None:
        self.admin.dispose()


def find_server() -> tuple[PgServer | None, str]:
    """(server, "") when KVREG_TEST_PG_URL names a reachable server, else (None, why not)."""
    url = os.environ.get(ENV)
    if not url:
        return None, f"{ENV} is not set (see tests/pg.py to start a server)"
    try:
        server = PgServer(url)
        server.sql("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means: no server to test against
        from kvreg.db.engine import mask_url

        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"cannot reach {mask_url(url)}: {first}"
    return server, ""


# --------------------------------------------------------------------------- local server


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def start(port: int = 5433, folder: str | None = None) -> str:
    """initdb into a new folder and start a server on 127.0.0.1:port; returns the folder."""
    # In memory when possible: the tests create a database per test, which is disk-bound.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    folder = folder or tempfile.mkdtemp(prefix="kvreg-pg-", dir=shm)
    data = Path(folder) / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    subprocess.run(_as_postgres(["initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                                 "--no-sync"]), check=True, stdout=subprocess.DEVNULL)
    (data / "pg_hba.conf").write_text(PG_HBA)
    opts = (f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c jit=off")
    subprocess.run(_as_postgres(["pg_ctl", "-D", str(data), "-l", f"{folder}/server.log", "-o", opts, "-w",
                                 "start"]), check=True)
    return folder


def stop(folder: str) -> None:
    """Stop the server started in folder and remove the folder."""
    subprocess.run(_as_postgres(["pg_ctl", "-D", f"{folder}/data", "-m", "fast", "-w", "stop"]), check=False)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "start":
        port = int(sys.argv[2]) if len(sys.argv) > 2 else 5433
        where = start(port)
        print(f"export {ENV}=postgresql+psycopg://postgres@127.0.0.1:{port}/postgres")
        print(f"# stop with: python tests/pg.py stop {where}")
    elif len(sys.argv) == 3 and sys.argv[1] == "stop":
        stop(sys.argv[2])
    else:
        sys.exit("usage: python tests/pg.py start [PORT] | stop FOLDER")
