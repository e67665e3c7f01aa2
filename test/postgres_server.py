"""A private PostgreSQL server for tests: its own cluster in a temporary folder, on 127.0.0.1.

Debian's PostgreSQL (`apt-get install postgresql`; scripts/test.sh installs it where it can).
PostgreSQL refuses to run as root, so under root the cluster belongs to `nobody`. Nothing
listens beyond 127.0.0.1, and the folder is removed at the end.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

#: the user the cluster runs as when the tests run as root
CLUSTER_USER = "nobody"


def postgres_bin() -> Path | None:
    """Debian's folder of PostgreSQL's server programs (newest version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateCluster:
    """initdb, start, stop, start again; `url` for SQLAlchemy (psycopg)."""

    def __init__(self, bindir: Path):
        self.bindir, self.port = bindir, _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="vd-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.root.chmod(0o755)
        self._as = []
        if os.geteuid() == 0:
            shutil.chown(self.root, CLUSTER_USER)
            self._as = ["runuser", "-u", CLUSTER_USER, "--"]
        self._run("initdb", "-D", str(self.data), "-U", "vd", "--auth=trust", "-E", "UTF8")
        self.url = f"postgresql://vd@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(self._as + [str(self.bindir / program), *args], check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        """Start and wait until it takes connections (pg_ctl -w waits for that)."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root}", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
