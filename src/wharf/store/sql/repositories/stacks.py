"""Stack components and stacks.

Invariants: a component is unique per (type, name); a stack is unique by name and holds at most
one component per type, each of the type it is listed under (checked inside the creating
transaction). Updates and deletions check what depends on the row after locking it, in the same
transaction: a run's steps all see one configuration, and nothing in use is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Row, Select, delete, select, update

from wharf.core.enums import FINISHED_STATUSES, ComponentType
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
)
from wharf.core.ids import new_id
from wharf.core.names import check_not_an_id, lookup_form
from wharf.core.suggestions import did_you_mean
from wharf.sql import exact
from wharf.sql.errors import UniqueViolationError
from wharf.store.models import ComponentCreate, ComponentRecord, Page, PageRequest, StackRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    chunks,
    fetch_page,
    list_page,
    not_found,
    to_page,
)

_C = t.component
_S = t.stack
_L = t.stack_component
_SN = t.pipeline_snapshot
_R = t.pipeline_run
_SC = t.schedule
_FINISHED = sorted(s.value for s in FINISHED_STATUSES)
_NAMED = 5
"""At most this many names are listed in a refusal (then "and N more")."""


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_NAMED])
    return shown if len(names) <= _NAMED else f"{shown} and {len(names) - _NAMED} more"


def _unfinished_runs(conn: Connection, snapshots: Select[Any]) -> list[str]:
    """The names of the unfinished runs of ``snapshots`` (a query of snapshot ids), oldest
    first."""
    runs = (
        select(_R.c.name)
        .where(_R.c.snapshot_id.in_(snapshots), _R.c.status.not_in(_FINISHED))
        .order_by(_R.c.created, exact.in_code_point_order(_R.c.name))
    )
    return list(conn.execute(runs).scalars().all())


def _component(row: Row[Any]) -> ComponentRecord:
    return ComponentRecord.model_validate(row._asdict())


def _components_of(conn: Connection, stack_ids: Sequence[UUID]) -> dict[UUID, dict[str, UUID]]:
    links: dict[UUID, dict[str, UUID]] = {i: {} for i in stack_ids}
    for chunk in chunks(stack_ids):
        stmt = select(_L.c.stack_id, _L.c.component_type, _L.c.component_id).where(
            _L.c.stack_id.in_(chunk)
        )
        for stack_id, component_type, component_id in conn.execute(stmt):
            links[stack_id][component_type] = component_id
    return links


def _stack(row: Row[Any], components: dict[str, UUID]) -> StackRecord:
    return StackRecord.model_validate({**row._asdict(), "components": components})


class SqlStackRepository(SqlRepository):
    # ----------------------------------------------------------------- components

    def create_component(self, component: ComponentCreate) -> ComponentRecord:
        name = check_not_an_id(check_name(component.name, "component"), "component")
        values = {
            "id": new_id(),
            "name": name,
            "type": component.type.value,  # enums are bound by value, never by member name
            "flavor": component.flavor,
            "configuration": component.configuration,
            "created": self._db.now(),
        }
        try:
            self._db.write(lambda c: c.execute(_C.insert(), values))
        except UniqueViolationError:
            kind = component.type.value
            article = "An" if kind[0] in "aeiou" else "A"
            raise EntityExistsError(
                f"{article} {kind} component named '{name}' already exists."
            ) from None
        return ComponentRecord.model_validate(values)

    def get_component(self, component_id: UUID) -> ComponentRecord:
        stmt = select(_C).where(_C.c.id == component_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("stack component", component_id)
        return _component(row)

    def get_component_by_name(self, type: ComponentType, name: str) -> ComponentRecord:
        stored = lookup_form(name)
        stmt = select(_C).where(_C.c.type == type.value, _C.c.name == stored)
        row = None if stored is None else self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"No {type.value} component named '{name}'.")
        return _component(row)

    def list_components(
        self, type: ComponentType | None = None, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ComponentRecord]:
        conditions = [] if type is None else [_C.c.type == type.value]
        return list_page(self._db, _C, conditions, page, _component)

    def update_component(
        self, component_id: UUID, configuration: dict[str, Any]
    ) -> ComponentRecord:
        """Replace the configuration, only while no run is unfinished on a stack that lists the
        component (checked after locking its row), so a run's steps all see one configuration;
        an orchestrator's, also only while no schedule uses such a stack: the platform keeps the
        schedule (a CronJob) where and as the configuration said when it was scheduled, and
        ``wharf schedule pause/delete`` would look for it where the new one says."""

        def change(conn: Connection) -> ComponentRecord:
            stmt = select(_C).where(_C.c.id == component_id).with_for_update()
            row = conn.execute(stmt).first()
            if row is None:
                raise not_found("stack component", component_id)
            stacks = select(_L.c.stack_id).where(_L.c.component_id == component_id)
            snapshots = select(_SN.c.id).where(_SN.c.stack_id.in_(stacks))
            unfinished = _unfinished_runs(conn, snapshots)
            if unfinished:
                raise IllegalOperationError(
                    f"Component '{row.name}' ({row.type}) is used by unfinished run(s) "
                    f"{_names(unfinished)}: wait for them to finish or stop them first."
                )
            if row.type == ComponentType.ARTIFACT_STORE.value:
                _refuse_moving_artifacts(conn, row, configuration)
            if row.type == ComponentType.ORCHESTRATOR.value:
                schedules = (
                    select(_SC.c.name)
                    .where(_SC.c.snapshot_id.in_(snapshots))
                    .order_by(exact.in_code_point_order(_SC.c.name))
                )
                scheduled = list(conn.execute(schedules).scalars().all())
                if scheduled:
                    raise IllegalOperationError(
                        f"Component '{row.name}' ({row.type}) is used by schedule(s) "
                        f"{_names(scheduled)}, which it keeps as it was configured: delete those "
                        "schedules first."
                    )
            conn.execute(
                update(_C).where(_C.c.id == component_id), {"configuration": configuration}
            )
            return _component(conn.execute(select(_C).where(_C.c.id == component_id)).one())

        return self._db.write(change)

    # ----------------------------------------------------------------- stacks

    def create_stack(self, name: str, components: dict[ComponentType, UUID]) -> StackRecord:
        name = check_not_an_id(check_name(name, "stack"), "stack")
        stack_id = new_id()
        values = {"id": stack_id, "name": name, "created": self._db.now()}
        wanted = {ComponentType(k): v for k, v in components.items()}

        def create(conn: Connection) -> None:
            ids = list(set(wanted.values()))
            stmt = select(_C.c.id, _C.c.type).where(_C.c.id.in_(ids))
            found: dict[UUID, str] = {row.id: row.type for row in conn.execute(stmt)}
            for component_type, component_id in wanted.items():
                actual = found.get(component_id)
                if actual is None:
                    raise InputError(f"Stack component {component_id} does not exist.")
                if actual != component_type.value:
                    raise InputError(
                        f"Component {component_id} is of type {actual}, not {component_type.value}."
                    )
            conn.execute(_S.insert(), values)
            if wanted:
                conn.execute(
                    _L.insert(),
                    [
                        {"stack_id": stack_id, "component_type": k.value, "component_id": v}
                        for k, v in wanted.items()
                    ],
                )

        try:
            self._db.write(create)
        except UniqueViolationError:
            raise EntityExistsError(f"A stack named '{name}' already exists.") from None
        return StackRecord.model_validate({**values, "components": wanted})

    def get_stack(self, stack_id: UUID) -> StackRecord:
        def get(conn: Connection) -> StackRecord | None:
            row = conn.execute(select(_S).where(_S.c.id == stack_id)).first()
            if row is None:
                return None
            return _stack(row, _components_of(conn, [row.id])[row.id])

        record = self._db.read(get)
        if record is None:
            raise not_found("stack", stack_id)
        return record

    def get_stack_by_name(self, name: str) -> StackRecord:
        stored = lookup_form(name)

        def get(conn: Connection) -> StackRecord | None:
            row = conn.execute(select(_S).where(_S.c.name == stored)).first()
            if row is None:
                return None
            return _stack(row, _components_of(conn, [row.id])[row.id])

        record = None if stored is None else self._db.read(get)
        if record is None:
            names = self._db.read(lambda conn: list(conn.execute(select(_S.c.name)).scalars()))
            raise EntityNotFoundError(f"No stack named '{name}'{did_you_mean(name, names) or '.'}")
        return record

    def list_stacks(self, page: PageRequest = DEFAULT_PAGE) -> Page[StackRecord]:
        def query(conn: Connection) -> Page[StackRecord]:
            rows, total = fetch_page(conn, select(_S), _S, [], page)
            links = _components_of(conn, [r.id for r in rows])
            return to_page([_stack(r, links[r.id]) for r in rows], total, page)

        return self._db.read(query)

    # ----------------------------------------------------------------- deletion

    def delete_component(self, component_id: UUID) -> None:
        """Delete the component, only while no stack lists it (checked after locking its row)."""

        def remove(conn: Connection) -> None:
            stmt = select(_C.c.name, _C.c.type).where(_C.c.id == component_id).with_for_update()
            row = conn.execute(stmt).first()
            if row is None:
                raise not_found("stack component", component_id)
            users = select(_S.c.name).join(_L, _L.c.stack_id == _S.c.id)
            names = list(
                conn.execute(
                    users.where(_L.c.component_id == component_id).order_by(
                        exact.in_code_point_order(_S.c.name)
                    )
                )
                .scalars()
                .all()
            )
            if names:
                raise IllegalOperationError(
                    f"Component '{row.name}' ({row.type}) is used by stack(s) {_names(names)}: "
                    "delete those stacks first."
                )
            conn.execute(delete(_C).where(_C.c.id == component_id))

        self._db.write(remove)

    def delete_stack(self, stack_id: UUID) -> None:
        """Delete the stack, only while no run of its snapshots is unfinished and no schedule
        uses one of them (checked after locking its row); its snapshots keep their runs with
        ``stack_id = NULL``."""

        def remove(conn: Connection) -> None:
            stmt = select(_S.c.name).where(_S.c.id == stack_id).with_for_update()
            name = conn.execute(stmt).scalar()
            if name is None:
                raise not_found("stack", stack_id)
            of_stack = select(_SN.c.id).where(_SN.c.stack_id == stack_id)
            unfinished = _unfinished_runs(conn, of_stack)
            if unfinished:
                raise IllegalOperationError(
                    f"Stack '{name}' has unfinished run(s) {_names(unfinished)}: "
                    "wait for them to finish or stop them first."
                )
            schedules = (
                select(_SC.c.name)
                .where(_SC.c.snapshot_id.in_(of_stack))
                .order_by(exact.in_code_point_order(_SC.c.name))
            )
            scheduled = list(conn.execute(schedules).scalars().all())
            if scheduled:
                raise IllegalOperationError(
                    f"Stack '{name}' is used by schedule(s) {_names(scheduled)}: "
                    "delete those schedules first."
                )
            conn.execute(update(_SN).where(_SN.c.stack_id == stack_id), {"stack_id": None})
            conn.execute(delete(_L).where(_L.c.stack_id == stack_id))
            conn.execute(delete(_S).where(_S.c.id == stack_id))

        self._db.write(remove)


def _refuse_moving_artifacts(conn: Connection, row: Any, configuration: dict[str, Any]) -> None:
    """Refuse a new ``path`` for an artifact store that artifact versions were written to:
    each is read back at its recorded URI, which must lie under the store's path, so every one
    would become unloadable (the QA pass); a new store keeps them readable."""
    old = (row.configuration or {}).get("path")
    if old == configuration.get("path"):
        return
    stored = select(t.artifact_version.c.id).where(t.artifact_version.c.artifact_store_id == row.id)
    if conn.execute(stored.limit(1)).first() is not None:
        raise IllegalOperationError(
            f"Artifact store '{row.name}' holds artifact versions under {old!r}: with another "
            "path they could no longer be loaded. Register a new artifact store (and a stack "
            "with it) instead."
        )
