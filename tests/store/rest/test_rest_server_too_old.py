"""A client newer than its workspace server: a call whose route the server does not have yet is
one clear ``ServerTooOldError`` (the route, both versions, upgrade the server), not the bare
"Method Not Allowed" / "Not Found" of the server's router that failed a pipeline call before.

The server is a real one (uvicorn over TCP) built as a server from before
``POST /api/v1/runs/record``, ``PUT /api/v1/runs/{id}/heartbeat`` and
``GET /api/v1/runs/sweep_candidates``: the app with those routes taken out."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.e2e import steps_lib
from tests.server.conftest import World, world  # noqa: F401 (fixtures)
from tests.server.live import LiveServer, settings, shared_default_stack
from tests.store.conftest import make_world, spec
from wharf import __version__, pipeline
from wharf.config.global_config import load_config
from wharf.core.errors import InputError
from wharf.sdk.workspace import Workspace
from wharf.server.app import create_app
from wharf.store.models import OrchestratorProcess, PipelineFilter, RunFilter, RunStart
from wharf.store.rest import RestStore
from wharf.store.rest.errors import ServerTooOldError

ABSENT = {
    ("POST", "/api/v1/runs/record"),
    ("PUT", "/api/v1/runs/{run_id}/heartbeat"),
    ("GET", "/api/v1/runs/sweep_candidates"),  # GET /api/v1/runs/{run_id} answers it: 422
}


def older_app() -> object:
    """The workspace server's app as it was before the routes of ``ABSENT``."""
    app = create_app(settings())
    kept = []
    for route in app.router.routes:
        methods = getattr(route, "methods", None) or set()
        if not any((method, getattr(route, "path", "")) in ABSENT for method in methods):
            kept.append(route)
    assert len(app.router.routes) - len(kept) == len(ABSENT)
    app.router.routes[:] = kept
    return app


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """Replaces the server fixtures' ``live``: the older server."""
    server = LiveServer(older_app()).start()  # type: ignore[arg-type]
    yield server
    server.stop()


def too_old(method: str, path: str, url: str) -> str:
    return (
        f"The Wharf server at {url} (version {__version__}) has no route {method} {path}, "
        f"which this client (version {__version__}) needs: the server is older than the client."
    )


def test_recording_a_run_on_an_older_server_says_it_is_older(world: World) -> None:  # noqa: F811
    records = make_world(world.stores.store)
    with (
        RestStore(world.url, world.credentials["admin"]) as store,
        pytest.raises(ServerTooOldError) as raised,
    ):
        store.runs.record(records.project.id, "p", None, spec("p"), RunStart(name="r"))
    message = str(raised.value)
    assert message.startswith(too_old("POST", "/api/v1/runs/record", world.url))
    assert "\n" not in message and "Upgrade the server" in message
    server_store = world.stores.store  # no fallback to the plain calls: nothing written
    assert (
        server_store.pipelines.list(PipelineFilter(project_id=records.project.id, name="p")).total
        == 0
    )
    assert server_store.runs.list(RunFilter(project_id=records.project.id)).total == 0


def test_a_route_the_server_answers_404_for_says_it_too(world: World) -> None:  # noqa: F811
    run = make_world(world.stores.store).run()
    process = OrchestratorProcess(host="h", pid=1, liveness_timeout_seconds=60)
    with RestStore(world.url, world.credentials["admin"]) as store:
        with pytest.raises(ServerTooOldError) as raised:
            store.runs.update_heartbeat(run.id, process)
        assert store.runs.get(run.id) == run  # the routes it has still answer
    path = f"/api/v1/runs/{run.id}/heartbeat"
    assert str(raised.value).startswith(too_old("PUT", path, world.url))


def test_a_route_the_server_takes_for_a_run_id_says_it_too(world: World) -> None:  # noqa: F811
    """The older server matches GET /api/v1/runs/sweep_candidates with its
    GET /api/v1/runs/{run_id} and answers 422 (no UUID): the same one line. A genuine 422 of
    that route or of another (the id's, a query parameter's) stays an InputError."""
    path = "/api/v1/runs/sweep_candidates"
    with RestStore(world.url, world.credentials["admin"]) as store:
        with pytest.raises(ServerTooOldError) as raised:
            store.runs.list_sweep_candidates(datetime.now(UTC))
        assert str(raised.value).startswith(too_old("GET", path, world.url))
        for wrong, params in (("/api/v1/runs/0123abcd", None), ("/api/v1/runs", {"size": "x"})):
            with pytest.raises(InputError) as genuine:
                store.http.send("GET", wrong, params=params)
            assert not isinstance(genuine.value, ServerTooOldError)
            assert str(genuine.value).startswith("Invalid request: "), genuine.value


@pytest.fixture
def member_home(world: World, tmp_path: Path) -> Path:  # noqa: F811
    shared_default_stack(world.state, tmp_path / "shared-artifacts")
    return tmp_path / "home"


@pipeline(name="on_an_older_server")
def on_an_older_server() -> None:
    steps_lib.double(steps_lib.produce(value=21))


def test_a_pipeline_call_on_an_older_server_fails_with_that_one_line(
    world: World,  # noqa: F811
    member_home: Path,
) -> None:
    env = {
        "WHARF_HOME": str(member_home),
        "WHARF_SERVER_URL": world.url,
        "WHARF_API_KEY": str(world.credentials["member"]),
        "WHARF_PROJECT": "A",
    }
    workspace = Workspace.open(load_config(env))
    try:
        with pytest.raises(ServerTooOldError) as raised:
            on_an_older_server.run_in(workspace)
    finally:
        workspace.close()
    assert str(raised.value).startswith(too_old("POST", "/api/v1/runs/record", world.url))
