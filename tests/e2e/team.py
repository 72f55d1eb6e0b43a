"""Team mode for end-to-end tests: a Resource Manager service and a workspace server, each a
real ``wharf … serve`` process on its own PostgreSQL (or other) database, wired together.

The test process then talks to the workspace server like any SDK user (``WHARF_SERVER_URL`` +
an access token), and to the Resource Manager as its administrator (pools and policies).
Either service can be stopped and started again on the same port and database, which is how
the tests make the Resource Manager unreachable.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from wharf.resource_manager.client.http import HttpResourceManager

WHARF = str(Path(sys.executable).parent / "wharf")
ADMIN = "admin"
ADMIN_PASSWORD = "admin-password-for-tests"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """One ``wharf … serve`` process that can be stopped and started again."""

    name: str
    args: list[str]
    env: dict[str, str]
    health_url: str
    log_file: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.launch()
        self.wait_until_healthy()

    def launch(self) -> None:
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [WHARF, *self.args], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_until_healthy(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start-up:\n{self.log()}")
            try:
                if httpx.get(self.health_url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {START_TIMEOUT} s:\n{self.log()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # A crash, as far as its clients can tell (and its throw-away database doesn't mind):
        # uvicorn's graceful exit would wait for the test process's idle keep-alive connections.
        process.kill()
        process.wait()

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:]


@dataclass
class Team:
    """A Resource Manager and a workspace server that uses it."""

    resource_manager: Service
    server: Service
    rm_url: str
    rm_admin_key: str
    server_url: str
    token: str = ""

    def rm_client(self) -> HttpResourceManager:
        """The Resource Manager as its administrator (pools, policies, any request)."""
        return HttpResourceManager(self.rm_url, api_key=self.rm_admin_key)

    def user_env(self) -> dict[str, str]:
        """What an SDK user of this workspace server sets."""
        return {"WHARF_SERVER_URL": self.server_url, "WHARF_API_KEY": self.token}

    def login(self) -> None:
        answer = httpx.post(
            f"{self.server_url}/api/v1/auth/login",
            json={"username": ADMIN, "password": ADMIN_PASSWORD},
            timeout=30,
        )
        answer.raise_for_status()
        self.token = answer.json()["access_token"]

    def stop(self) -> None:
        self.server.stop()
        self.resource_manager.stop()


def start_team(
    rm_database_url: str, server_database_url: str, workdir: Path, *, sweep_interval: float = 0.5
) -> Team:
    """Start both services (Resource Manager first) and log in as the workspace's admin."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(workdir / "service-home")
    rm_port, server_port = free_port(), free_port()
    rm_url = f"http://127.0.0.1:{rm_port}"
    server_url = f"http://127.0.0.1:{server_port}"
    rm_key = "rm-admin-" + secrets.token_urlsafe(24)
    resource_manager = Service(
        "resource manager",
        [
            "resource-manager",
            "serve",
            "--port",
            str(rm_port),
            "--db-url",
            rm_database_url,
            "--admin-api-key",
            rm_key,
            "--secret-key",
            secrets.token_urlsafe(48),
            "--sweep-interval",
            str(sweep_interval),
            "--log-level",
            "warning",
        ],
        env,
        f"{rm_url}/health",
        workdir / "resource-manager.log",
    )
    server = Service(
        "workspace server",
        [
            "server",
            "serve",
            "--port",
            str(server_port),
            "--db-url",
            server_database_url,
            "--secret-key",
            secrets.token_urlsafe(48),
            "--admin-username",
            ADMIN,
            "--admin-password",
            ADMIN_PASSWORD,
            "--artifact-root",
            str(workdir / "shared-artifacts"),  # the team's shared artifact directory
            "--resource-manager-url",
            rm_url,
            "--resource-manager-token",
            rm_key,
            "--log-level",
            "warning",
        ],
        env,
        f"{server_url}/health",
        workdir / "server.log",
    )
    team = Team(resource_manager, server, rm_url, rm_key, server_url)
    try:  # both at once: the server connects to the Resource Manager only when it needs it
        resource_manager.launch()
        server.launch()
        resource_manager.wait_until_healthy()
        server.wait_until_healthy()
        team.login()
    except BaseException:
        team.stop()
        raise
    return team
