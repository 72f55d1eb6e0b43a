"""Steps of the end-to-end tests over a workspace server (importable, so a step's own process
can resolve them by source)."""

from __future__ import annotations

import hashlib
import json
import os

import httpx

from wharf import step


def credential_digest(credential: str) -> str:
    return hashlib.sha256(credential.encode()).hexdigest()


@step(enable_cache=False)
def report_identity(path: str, same_project_run: str, other_project_run: str) -> int:
    """Write to ``path`` who the server takes this process for, and what it answers when the
    process reads two runs that are not its own."""
    url, credential = os.environ["WHARF_SERVER_URL"], os.environ["WHARF_API_KEY"]
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {credential}"}) as client:
        facts = {
            "pid": os.getpid(),
            "credential": credential_digest(credential),
            "me": client.get("/api/v1/auth/me").json(),
            "same_project_run": client.get(f"/api/v1/runs/{same_project_run}").status_code,
            "other_project_run": client.get(f"/api/v1/runs/{other_project_run}").status_code,
        }
    with open(path, "w") as f:
        json.dump(facts, f)
    return 1
