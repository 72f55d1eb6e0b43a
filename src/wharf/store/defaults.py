"""The default user and project every fresh store gets, created through the ports only.

``ensure_defaults`` is idempotent and race-safe: several processes may call it at once on the
same store; whoever loses a creation race reads the winner's record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wharf.core.errors import EntityExistsError, EntityNotFoundError

if TYPE_CHECKING:  # the names alone are light: the CLI's embedded RM reads DEFAULT_USER
    from wharf.store.models import ProjectRecord, UserRecord
    from wharf.store.ports import Store

DEFAULT_USER = "default"
DEFAULT_PROJECT = "default"


def ensure_defaults(store: Store) -> tuple[UserRecord, ProjectRecord]:
    """The default user (an admin) and the default project, created if missing."""
    return ensure_default_user(store), _ensure_project(store)


def ensure_default_user(store: Store) -> UserRecord:
    """The default user (an admin), created if missing; safe against a concurrent creator."""
    try:
        return store.users.get_by_name(DEFAULT_USER)
    except EntityNotFoundError:
        pass
    try:
        return store.users.create(DEFAULT_USER, is_admin=True)
    except EntityExistsError:
        return store.users.get_by_name(DEFAULT_USER)


def _ensure_project(store: Store) -> ProjectRecord:
    try:
        return store.projects.get_by_name(DEFAULT_PROJECT)
    except EntityNotFoundError:
        pass
    try:
        return store.projects.create(DEFAULT_PROJECT)
    except EntityExistsError:
        return store.projects.get_by_name(DEFAULT_PROJECT)
