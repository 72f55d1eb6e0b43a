"""Fairness of the store's change delivery (``listeners.py``): a writer that delivers stops once
its own change and the changes listeners wrote in reaction are delivered, never waits for
changes queued after them, and never waits for another thread. Deterministic: listeners block on
Events the test sets; the timeouts only keep a broken delivery from hanging the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.kube.emulator.resources import CONFIGMAPS
from tests.kube.emulator.store import ObjectStore, WatchEvent
from tests.kube.store_testing import clock, store

__all__ = ["clock", "store"]  # the fixtures

GUARD = 30.0  # seconds; only reached when delivery is broken


class Gated:
    """A listener recording the configmaps it has finished with; ``hold(name)`` makes it stop
    in the middle of that configmap's ADDED until ``release(name)``, ``then(name, action)``
    runs ``action`` there (a controller writing in reaction)."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.entered: dict[str, threading.Event] = {}
        self.finished: dict[str, threading.Event] = {}
        self._gates: dict[str, threading.Event] = {}
        self._actions: dict[str, Callable[[], object]] = {}

    def hold(self, name: str) -> None:
        self._gates[name] = threading.Event()

    def release(self, name: str) -> None:
        self._gates[name].set()

    def then(self, name: str, action: Callable[[], object]) -> None:
        self._actions[name] = action

    def watch(self, name: str) -> None:
        self.entered[name] = threading.Event()
        self.finished[name] = threading.Event()

    def __call__(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if event.type != "ADDED" or event.rtype != CONFIGMAPS:
            return
        if name in self.entered:
            self.entered[name].set()
        if name in self._gates:
            assert self._gates[name].wait(GUARD)
        if name in self._actions:
            self._actions[name]()
        self.done.append(name)
        if name in self.finished:
            self.finished[name].set()


def create(store: ObjectStore, name: str) -> dict[str, Any]:
    return store.create(CONFIGMAPS, "default", {"metadata": {"name": name}})


def in_thread(action: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_a_writer_returns_before_changes_queued_after_its_own(store: ObjectStore) -> None:
    """b is queued while a is being delivered and b's delivery cannot end before a's writer
    has returned: a's writer must not wait for it (it would never return)."""
    listener = Gated()
    for name in ("a", "b"):
        listener.watch(name)
        listener.hold(name)
    store.subscribe(listener)

    writer_a = in_thread(lambda: create(store, "a"))
    assert listener.entered["a"].wait(GUARD)  # a's writer is delivering a, held in the listener
    create(store, "b")  # someone else delivers: this writer returns at once
    assert listener.done == []
    listener.release("a")
    writer_a.join(GUARD)
    returned = not writer_a.is_alive()
    listener.release("b")  # only now can b's delivery end (on a helper thread)
    assert returned, "a's writer waited for b, queued after a"
    assert listener.finished["b"].wait(GUARD)
    assert listener.done == ["a", "b"]


def test_a_writer_waits_for_its_cascade_and_what_was_queued_before_it(
    store: ObjectStore,
) -> None:
    """A listener writes a-child while handling a, after b was queued by another writer: a's
    writer returns only when a-child is delivered, and b, queued before a-child, comes first."""
    listener = Gated()
    listener.watch("a")
    listener.hold("a")
    listener.then("a", lambda: create(store, "a-child"))
    store.subscribe(listener)

    writer_a = in_thread(lambda: create(store, "a"))
    assert listener.entered["a"].wait(GUARD)
    create(store, "b")
    listener.release("a")
    writer_a.join(GUARD)
    assert not writer_a.is_alive()
    assert listener.done == ["a", "b", "a-child"]


def test_a_writer_never_waits_for_a_delivery_blocked_on_its_lock(store: ObjectStore) -> None:
    """The controllers' tick writes while holding the lock their listener takes: a write made
    while another thread's delivery waits for that lock must return, not deadlock."""
    controllers_lock = threading.Lock()
    lock_held, delivering_d, tick_wrote = threading.Event(), threading.Event(), threading.Event()
    listener = Gated()
    listener.watch("d")
    listener.watch("ticked")

    def needs_the_lock(event: WatchEvent) -> None:
        if event.object["metadata"]["name"] == "d":
            delivering_d.set()
        with controllers_lock:
            listener(event)

    def tick() -> None:
        with controllers_lock:
            lock_held.set()
            assert delivering_d.wait(GUARD)  # d's delivery holds the role, waits for the lock
            create(store, "ticked")
            tick_wrote.set()

    store.subscribe(needs_the_lock)
    ticker = in_thread(tick)
    assert lock_held.wait(GUARD)
    writer_d = in_thread(lambda: create(store, "d"))
    assert tick_wrote.wait(GUARD), "a write waited for a delivery blocked on the writer's lock"
    ticker.join(GUARD)
    writer_d.join(GUARD)
    assert not writer_d.is_alive()
    assert listener.finished["ticked"].wait(GUARD)
    assert listener.done == ["d", "ticked"]


def test_a_lone_writer_returns_with_every_reaction_delivered(store: ObjectStore) -> None:
    """Without other writers, a write returns once the listeners have handled it and the
    changes they wrote in reaction, transitively (what the controller tests rely on)."""
    listener = Gated()
    listener.then("x", lambda: create(store, "x-1"))
    listener.then("x-1", lambda: create(store, "x-2"))
    store.subscribe(listener)
    create(store, "x")
    assert listener.done == ["x", "x-1", "x-2"]
