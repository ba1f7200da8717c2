"""A PostgreSQL server for tests and benchmarks: Debian's `initdb` and `postgres` on 127.0.0.1,
an ephemeral port, a temporary data directory, trust authentication; killed by pid at teardown.

PostgreSQL refuses to run as root: under root the server runs as the `postgres` user.
"""
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from minilog.connector.local_cluster import free_port, wait_for_port

INITDB = shutil.which("initdb") or "/usr/lib/postgresql/15/bin/initdb"
POSTGRES = shutil.which("postgres") or "/usr/lib/postgresql/15/bin/postgres"


def available():
    return os.path.exists(INITDB) and os.path.exists(POSTGRES)


class PostgresServer:
    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="minilog-pg-")
        self.dir = Path(self._tmp.name)
        self.port = free_port()
        self.proc = None
        self._as = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self):
        """The JDBC URL a connector config takes."""
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres?user=postgres"

    def conninfo(self):
        return {"host": "127.0.0.1", "port": self.port, "dbname": "postgres", "user": "postgres"}

    def start(self, timeout=120):
        data = self.dir / "data"
        subprocess.run([*self._as, INITDB, "-D", str(data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True,
                       timeout=timeout)
        with open(self.dir / "postgres.log", "ab") as log:
            self.proc = subprocess.Popen(
                [*self._as, POSTGRES, "-D", str(data), "-p", str(self.port), "-k", str(self.dir),
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.port, timeout, self.proc)
        return self

    def query(self, sql, params=()):
        import psycopg
        with psycopg.connect(**self.conninfo()) as conn:
            return conn.execute(sql, params).fetchall()

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the server and its children
            self.proc.wait()
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)
        self._tmp.cleanup()
