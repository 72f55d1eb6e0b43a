"""Shared by the REST benchmarks: a workspace server in its own process(es), and its database.

``ServerProcess`` runs ``wharf server serve`` (uvicorn, ``workers`` processes) on a free port
with a throw-away Wharf home and an admin (``bench`` / ``bench-password``); ``database`` yields a
fresh SQLite file or a fresh PostgreSQL database (dropped at the end).

Linux ``/proc`` helpers (zero or None elsewhere): ``ServerProcess.cpu_seconds`` sums the CPU time
of the server and its workers, ``postgres_cpu_seconds`` that of the PostgreSQL backends connected
to one database (on a shared machine CPU time per request is a steadier figure than rates), and
``ServerProcess.worker_of`` tells which worker accepted a connection.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import sqlalchemy as sa

ADMIN = ("bench", "bench-password")
POSTGRES_URL = os.environ.get(
    "WHARF_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_and_parent(pid: int) -> tuple[float, int] | None:
    """(user + system CPU seconds, parent pid) of a live process, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[1])


def _descendants(root: int, processes: dict[int, tuple[float, int]]) -> set[int]:
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, (_, ppid) in processes.items() if ppid == parent]
        tree.update(children)
        frontier.extend(children)
    return tree


def _processes() -> dict[int, tuple[float, int]]:
    """pid -> (CPU seconds, parent pid) of every live process."""
    found: dict[int, tuple[float, int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            stat = _cpu_and_parent(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat
    return found


def process_tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by ``root`` and its live descendants."""
    processes = _processes()
    return sum(processes[pid][0] for pid in _descendants(root, processes) if pid in processes)


def connection_owner(root: int, server_port: int, client_port: int) -> int | None:
    """The process (``root`` or a descendant) holding the server side of the local TCP
    connection from ``client_port`` to ``server_port``; None if it cannot be told."""
    inode = None
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        local, remote = fields[1].split(":")[1], fields[2].split(":")[1]
        if int(local, 16) == server_port and int(remote, 16) == client_port:
            inode = fields[9]
            break
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in _descendants(root, _processes()):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == target:
                        return pid
    return None


def postgres_cpu_seconds(url: str) -> tuple[float, int]:
    """CPU seconds used so far by the PostgreSQL backends connected to the database of ``url``
    (the server must run on this machine), and how many sessions were ever opened on it.

    Backends that end between two readings take their CPU time with them: compare the session
    counts; when they differ, the CPU difference is not the whole cost."""
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            pids = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).scalars()
            found = [_cpu_and_parent(pid) for pid in pids]
            sessions = conn.exec_driver_sql(
                "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
            ).scalar_one()
    finally:
        engine.dispose()
    return sum(cpu for cpu, _ in filter(None, found)), int(sessions)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"
        return
    from wharf.sql.engine import normalize_url

    admin = normalize_url(POSTGRES_URL)
    name = f"wharf_bench_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()


class ServerProcess:
    def __init__(self, db_url: str, workers: int = 1, extra_args: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._home = tempfile.TemporaryDirectory()
        env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
        env.update(
            WHARF_HOME=self._home.name,
            WHARF_SERVER_ADMIN_USERNAME=ADMIN[0],
            WHARF_SERVER_ADMIN_PASSWORD=ADMIN[1],
        )
        command = [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "server",
            "serve",
            "--port",
            str(self.port),
            "--db-url",
            db_url,
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            *extra_args,
        ]
        self.process = subprocess.Popen(command, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError("the server exited while starting")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        return process_tree_cpu_seconds(self.process.pid)

    def worker_of(self, client_port: int) -> int | None:
        """The worker process serving the connection from local ``client_port``."""
        return connection_owner(self.process.pid, self.port, client_port)

    def admin_token(self) -> str:
        answer = httpx.post(
            f"{self.url}/api/v1/auth/login", json={"username": ADMIN[0], "password": ADMIN[1]}
        )
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._home.cleanup()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
