"""The ids the workspace server stores for ids its callers chose (``RunCreate.id``,
``SnapshotCreate.id``, ``StepRunCreate.id``): a creation repeated under the same chosen id (its
first answer was lost) must answer what it wrote, yet no caller may take the id that another
project's record has, or had.

Owns :func:`stored_id` and :func:`as_chosen`. Invariant: the server never stores a chosen id as
it is, but ``uuid5(NAMESPACE, "<kind>:<owner id>:<chosen id>")``, the owner being a run's or
snapshot's project, a step run's run (whose id is its project's for ever, so the step's is
too). The same creation repeated maps to the same stored id (so it answers what was written);
two owners choosing the same id get different stored ids; a stored id is reachable from its
owner only (another would need a SHA-1 preimage). Ids the server makes itself are random
version 4 UUIDs (``wharf.core.ids.new_id``), these are version 5: the two never meet. So an id
belongs to one project for ever, even once its record is deleted and a caller chooses it
again, which ``wharf.server.scopes`` (each process's cache of ids' projects) relies on. Callers
use the ids the server answers. Embedded mode (the SQL store used directly) keeps ids as chosen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Literal
from uuid import UUID, uuid5

from wharf.core.errors import EntityExistsError

NAMESPACE = UUID("6f1d3c8e-2a4b-4f0e-9c7d-5b8a1e2f3c4d")
"""Fixed for ever: another namespace would store a repeat in flight under another id."""

Kind = Literal["pipeline_run", "pipeline_snapshot", "step_run"]


def stored_id(kind: Kind, owner: UUID, chosen: UUID | None) -> UUID | None:
    """The id the server stores for the ``kind`` record of ``owner`` (a run's or snapshot's
    project, a step run's run) whose caller chose ``chosen`` (None: the store picks one)."""
    if chosen is None:
        return None
    return uuid5(NAMESPACE, f"{kind}:{owner}:{chosen}")


@contextmanager
def as_chosen(ids: Iterable[tuple[UUID | None, UUID | None]]) -> Iterator[None]:
    """A store call under stored ids (``ids``: pairs of the id chosen, the id stored): a
    conflict it raises names the ids its caller chose, the only ones it knows until the
    server answers."""
    try:
        yield
    except EntityExistsError as exc:
        message = str(exc)
        for chosen, stored in ids:
            if chosen is not None and stored is not None:
                message = message.replace(str(stored), str(chosen))
        if message == str(exc):
            raise
        raise EntityExistsError(message) from None
