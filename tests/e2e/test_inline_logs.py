"""An inline step's log holds what the threads it started printed while it ran, and not what
the threads of another inline step running at the same time printed."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from wharf import Client, pipeline, step
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

both_running = threading.Barrier(2, timeout=120)


@step(enable_cache=False)
def chatty(label: str) -> None:
    def child() -> None:
        both_running.wait()  # the other step is running too: its threads print meanwhile
        print(f"child of {label}")
        grandchild = threading.Thread(target=print, args=(f"grandchild of {label}",))
        grandchild.start()
        grandchild.join()

    print(f"step {label}")
    thread = threading.Thread(target=child)
    thread.start()
    thread.join()
    with ThreadPoolExecutor(2) as pool:
        pool.submit(print, f"pool of {label}").result()


def test_threads_a_step_starts_print_into_its_log(workspace: Workspace) -> None:
    both_running.reset()

    @pipeline
    def p() -> None:
        chatty(label="a", id="a")
        chatty(label="b", id="b")

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    client = Client(workspace.config, workspace.store)
    for label in ("a", "b"):
        assert client.step_logs(label, run=run.id).splitlines() == [
            f"step {label}",
            f"child of {label}",
            f"grandchild of {label}",
            f"pool of {label}",
        ]


@step(enable_cache=False)
def writes_bytes() -> None:
    import sys

    sys.stdout.write("text\n")
    sys.stdout.flush()
    assert sys.stdout.writable()
    sys.stdout.buffer.write("raw é bytes\n".encode())
    sys.stdout.buffer.flush()


def test_an_inline_step_may_write_bytes_to_stdout(workspace: Workspace) -> None:
    """``sys.stdout.buffer`` was missing inline (an AttributeError), though not isolated."""

    @pipeline
    def p() -> None:
        writes_bytes()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED
    client = Client(workspace.config, workspace.store)
    assert client.step_logs("writes_bytes", run=run.id) == "text\nraw é bytes\n"
