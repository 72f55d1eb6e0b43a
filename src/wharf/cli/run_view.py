"""What ``wharf runs show`` prints: a run's header and its steps as an indented tree
(:func:`render`, from a :class:`RunView`; :func:`tree_rows`).

Invariant: pure; it renders the records it is given (``runs.py`` reads them) and the time
``now`` (for the duration of what still runs); it never reads a store or a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from wharf.cli.output import format_table
from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.resource_kinds import kind_named
from wharf.core.transitions import ended_unseen
from wharf.store.models import PipelineRunRecord, StepRunRecord

STEP_COLUMNS = ("step", "status", "duration", "details")


@dataclass(frozen=True)
class RunView:
    run: PipelineRunRecord
    pipeline_name: str
    steps: Sequence[StepRunRecord]
    """Every step run of the run (all attempts), in the order they started."""
    spec: PipelineSpec | None = None
    cached_from: Mapping[UUID, str] = field(default_factory=dict)
    """Step run id -> name of the run whose outputs it reused."""
    allocated: Mapping[UUID, str] = field(default_factory=dict)
    """Step run id -> what its resource request got."""
    stack: str | None = None
    """The stack the run ran on, as shown (``run_details``); None: not shown."""
    stack_name: str | None = None
    """The stack's name; None once the stack is deleted (``stack`` then says so) or not read."""


def in_pipeline_order(
    steps: Sequence[StepRunRecord], spec: PipelineSpec | None
) -> list[StepRunRecord]:
    """``steps`` (in the order they started) sorted by their step's place in ``spec`` (the
    order the pipeline's function called them); steps the spec does not name (dynamic, mapped)
    follow, in the order they started, so siblings that started together keep one order from
    run to run; attempts keep their order."""
    place = {name: i for i, name in enumerate(spec.steps)} if spec is not None else {}
    return sorted(steps, key=lambda s: place.get(s.name, len(place)))


def latest_attempts(steps: Sequence[StepRunRecord]) -> list[StepRunRecord]:
    """One step run per step name, its last attempt, in the order the names first appear."""
    latest: dict[str, StepRunRecord] = {}
    for step in steps:
        if step.name not in latest or step.attempt >= latest[step.name].attempt:
            latest[step.name] = step
    return list(latest.values())


def step_spec(step: StepRunRecord, spec: PipelineSpec | None) -> StepSpec | None:
    if step.spec is not None:
        return step.spec
    return None if spec is None else spec.steps.get(step.name)


def upstream_steps(
    steps: Sequence[StepRunRecord], spec: PipelineSpec | None
) -> dict[str, list[str]]:
    """Step name -> its upstream steps' names in this run (spec order, then data order): those
    its compiled spec names plus those whose outputs it read (mapped and dynamic steps are known
    by their data only), restricted to the steps of this run."""
    names = {s.name for s in steps}
    producers: dict[UUID, str] = {}
    for step in steps:
        for version in step.outputs.values():
            producers.setdefault(version, step.name)
    upstream: dict[str, list[str]] = {}
    for step in steps:
        compiled = step_spec(step, spec)
        named = list(compiled.upstream) if compiled is not None else []
        named += [producers[v] for v in step.inputs.values() if v in producers]
        upstream[step.name] = [n for n in dict.fromkeys(named) if n in names and n != step.name]
    return upstream


def asked_resources(step: StepRunRecord, spec: PipelineSpec | None) -> str | None:
    """What the step's settings ask for, e.g. ``2 CPU, 1 GPU (h100)``; None if nothing."""
    compiled = step_spec(step, spec)
    settings = None if compiled is None else compiled.config.resources
    if settings is None:
        return None
    parts = [
        demand_amount(d.quantity, d.unit, d.name, d.kind, d.class_name)
        for d in settings.canonical_demands()
    ]
    return ", ".join(parts) or None


def demand_amount(
    quantity: int, unit: str | None, resource: str | None, kind: str | None, class_name: str | None
) -> str:
    """A demand as :func:`amount` writes it, a kind named by its stock resource (``1 CPU``,
    ``256 MiB memory``), as ``pool show`` names capacities."""
    stock = kind_named(kind)
    what = resource or (stock.resource if stock else kind) or "selected resource"
    return amount(quantity, unit, what, class_name)


def amount(quantity: int, unit: str | None, what: str, class_name: str | None) -> str:
    """``2 GiB memory``, ``1 gpu (h100)``, ``1 license``, ``250 mCPU`` (a unit that names the
    resource, as ``mCPU`` names CPU, stands alone; the ``default`` class is left out)."""
    if not unit or unit.lower() == what.lower():
        text = f"{quantity} {what}"
    elif what.lower() in unit.lower():
        text = f"{quantity} {unit}"
    else:
        text = f"{quantity} {unit} {what}"
    return f"{text} ({class_name})" if class_name and class_name != "default" else text


def duration(
    start: datetime | None, end: datetime | None, now: datetime, *, unseen: bool = False
) -> str:
    """``850 ms``, ``5.6 s``, ``2 min 03 s``, ``1 h 02 min``; ``-`` before the start.
    ``unseen``: it ended when its process died unseen (the lost-run sweep), some time after
    ``end`` (when it was last seen alive): ``≥ 5.6 s``, or ``unknown`` under a second."""
    if start is None:
        return "-"
    seconds = max(0.0, ((end or now) - start).total_seconds())
    if unseen and end is not None:
        return "unknown" if seconds < 1 else f"≥ {duration(start, end, now)}"
    if seconds < 1:
        text = f"{seconds * 1000:.0f} ms"
    elif seconds < 60:
        text = f"{seconds:.1f} s"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    else:
        text = f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return text if end is not None else f"{text} so far"


def _details(view: RunView, step: StepRunRecord) -> str:
    parts = []
    if step.attempt > 1:
        parts.append(f"attempt {step.attempt}")
    if step.id in view.cached_from:
        parts.append(f"cached from run {view.cached_from[step.id]}")
    asked = asked_resources(step, view.spec)
    if asked is not None:
        parts.append(f"asked {asked}")
    if step.id in view.allocated:
        parts.append(f"got {view.allocated[step.id]}")
    elif step.resource_request_id is not None and asked is None:
        parts.append(f"resource request {step.resource_request_id}")
    reason = (step.status_reason or "").strip()
    if reason and not step.status.is_successful:
        parts.append(reason.splitlines()[0])
    return "; ".join(parts) or "-"


def unreached_steps(view: RunView) -> list[str]:
    """The steps of a static pipeline's compiled spec that have no step run in this run, in
    spec order: not started yet, or never (the run ended first). A dynamic pipeline's steps
    are known only once it calls them, so it has none."""
    if view.spec is None or view.spec.dynamic:
        return []
    ran = {s.name for s in view.steps}
    return [name for name in view.spec.steps if name not in ran]


def tree_rows(view: RunView, now: datetime) -> list[list[str]]:
    """The rows of the steps table, the step column indented as the tree: each step (its latest
    attempt) is listed under its first upstream step; a step with several upstream steps is
    listed once, under the first, and each other parent shows it as a reference line
    (``↳ NAME (listed under FIRST)``). A step of the pipeline with no step run yet is listed
    too: ``pending`` while the run goes on, ``not run`` once it has ended."""
    steps = latest_attempts(view.steps)
    by_name = {s.name: s for s in steps}
    upstream = upstream_steps(steps, view.spec)
    unreached = unreached_steps(view)
    for name in unreached:
        assert view.spec is not None  # unreached steps come from it
        known = by_name.keys() | set(unreached)
        upstream[name] = [n for n in view.spec.steps[name].upstream if n in known and n != name]
    children: dict[str | None, list[str]] = {}
    for name in [*by_name, *unreached]:
        parents: list[str | None] = [*upstream[name]] or [None]
        for parent in parents:
            children.setdefault(parent, []).append(name)
    rows: list[list[str]] = []
    listed: set[str] = set()

    def visit(name: str, prefix: str, connector: str, parent: str | None) -> None:
        first_parent = _first_parent(upstream, name)
        if parent != first_parent or name in listed:
            rows.append([f"{prefix}{connector}↳ {name}", "", "", f"listed under {first_parent}"])
            return
        listed.add(name)
        step = by_name.get(name)
        if step is None:
            rows.append([f"{prefix}{connector}{name}", *_unreached_row(view, upstream[name])])
        else:
            ended = ended_unseen(step.status_reason)
            rows.append(
                [
                    f"{prefix}{connector}{name}",
                    step.status.value,
                    duration(step.start_time, step.end_time, now, unseen=ended),
                    _details(view, step),
                ]
            )
        kids = children.get(name, [])
        inner = prefix + ("" if not connector else ("   " if connector == "└─ " else "│  "))
        for i, kid in enumerate(kids):
            visit(kid, inner, "└─ " if i == len(kids) - 1 else "├─ ", name)

    for root in children.get(None, []):
        visit(root, "", "", None)
    for name in [*by_name, *unreached]:  # a cycle (never compiled, but data can say anything)
        if name not in listed:
            visit(name, "", "", _first_parent(upstream, name))
    return rows


def _unreached_row(view: RunView, upstream: Sequence[str]) -> list[str]:
    """Status, duration and details of a step with no step run: ``pending`` (waiting for the
    upstream steps not yet done, if any) while the run goes on; ``not run`` once it ended."""
    if view.run.status.is_finished:
        return ["not run", "-", f"run {view.run.status.value} before it started"]
    done = {s.name for s in view.steps if s.status.is_successful}
    waits = [name for name in upstream if name not in done]
    return ["pending", "-", f"waits for {', '.join(waits)}" if waits else "-"]


def _first_parent(upstream: Mapping[str, list[str]], name: str) -> str | None:
    return upstream[name][0] if upstream[name] else None


def render(view: RunView, now: datetime) -> list[str]:
    run = view.run
    header = [
        ("Run", f"{run.name}  ({run.id})"),
        ("Pipeline", view.pipeline_name),
        *([] if view.stack is None else [("Stack", view.stack)]),
        ("Status", run.status.value),
        ("Started", "-" if run.start_time is None else _time(run.start_time)),
        (
            "Duration",
            duration(
                run.start_time or run.created,
                run.end_time,
                now,
                unseen=ended_unseen(run.status_reason),
            ),
        ),
    ]
    if run.status_reason:
        header.append(("Reason", " ".join(run.status_reason.split())))
    width = max(len(key) for key, _ in header)
    lines = [f"{key.ljust(width)}  {value}" for key, value in header]
    names = {s.name for s in view.steps} | set(unreached_steps(view))
    lines += ["", f"Steps ({len(names)})"]
    lines += format_table(STEP_COLUMNS, tree_rows(view, now)) if names else ["(none yet)"]
    if run.is_placeholder and not view.steps:  # e.g. a Kubernetes orchestrator pod not started
        lines.append(
            f"Its orchestrator has not started it yet: `wharf runs logs {run.name} --follow` "
            "follows it and says why if it never will."
        )
    return lines


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")
