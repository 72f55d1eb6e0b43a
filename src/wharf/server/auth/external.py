"""External identity: token introspection at a configured URL (:func:`introspect`), and the user
it maps to (:func:`sync_principal`).

Invariants: a human account's ``is_admin`` follows the provider's ``is_superuser`` on every
login; service accounts never get ``is_admin`` from the provider; a local name is linked only if
its user has no password and no external id (else 409).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wharf.core.errors import EntityExistsError, EntityNotFoundError, StoreUnavailableError
from wharf.server.auth.errors import AuthenticationError
from wharf.server.auth.principal import Principal
from wharf.server.state import ServerState


class ExternalUser(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=255)
    username: str = Field(min_length=1, max_length=255)
    is_service_account: bool = False
    is_superuser: bool = False

    @model_validator(mode="before")
    @classmethod
    def _sub_is_id(cls, data: object) -> object:
        if isinstance(data, dict) and "id" not in data and "sub" in data:
            return {**data, "id": str(data["sub"])}
        return data


def introspect(state: ServerState, token: str) -> ExternalUser:
    """POST ``token=<external token>`` (form-encoded, RFC 7662) to
    ``settings.introspection_url`` and read its JSON. Accepted fields (others ignored):
    ``active`` (False refuses the token), ``id`` or ``sub``, ``username``,
    ``is_service_account``, ``is_superuser``."""
    import httpx

    settings = state.settings
    url = settings.introspection_url
    if url is None:
        raise AuthenticationError("This server has no external identity provider.")
    headers = {}
    if settings.introspection_authorization is not None:
        headers["Authorization"] = settings.introspection_authorization.get_secret_value()
    try:
        response = httpx.post(
            url,
            data={"token": token},
            headers=headers,
            timeout=settings.introspection_timeout_seconds,
        )
    except httpx.HTTPError as exc:
        raise StoreUnavailableError(f"The identity provider cannot be reached: {exc}") from None
    if response.status_code in (400, 401, 403, 404):
        raise AuthenticationError("The identity provider refused the token.")
    if response.status_code != 200:
        raise StoreUnavailableError(
            f"The identity provider answered {response.status_code} to the introspection."
        )
    try:
        data = response.json()
    except ValueError:
        raise StoreUnavailableError("The identity provider answered with invalid JSON.") from None
    if not isinstance(data, dict) or data.get("active") is False:
        raise AuthenticationError("The identity provider refused the token.")
    try:
        return ExternalUser.model_validate(data)
    except ValidationError:
        raise AuthenticationError("The identity provider's answer names no user.") from None


def sync_principal(state: ServerState, external: ExternalUser) -> Principal:
    """The Wharf account of ``external``, created or updated (ZenML's
    ``authenticate_external_user``): a human account is found by its external id, or created
    (name = ``username``); its ``is_admin`` is set to the provider's ``is_superuser`` on every
    login. A local user of the same name that has no password and no external id is linked; a
    name taken otherwise is a conflict (409). Service accounts are found or created by name and
    never get ``is_admin`` from the provider."""
    if external.is_service_account:
        accounts = state.accounts.service_accounts
        try:
            account = accounts.get_by_name(external.username)
        except EntityNotFoundError:
            try:
                account = accounts.create(external.username, description="external identity")
            except EntityExistsError:
                account = accounts.get_by_name(external.username)
        if not account.active:
            raise AuthenticationError("This service account is inactive.")
        return Principal("service_account", account.id, account.name, account.is_admin)
    credentials = state.accounts.credentials
    users = state.store.users
    try:
        user_id = credentials.get_by_external_id(external.id).user_id
    except EntityNotFoundError:
        try:
            user = users.create(external.username, is_admin=external.is_superuser)
        except EntityExistsError:
            user = users.get_by_name(external.username)
            try:
                existing = credentials.get(user.id)
            except EntityNotFoundError:
                existing = None
            if existing is not None and (
                existing.password_hash is not None or existing.external_id is not None
            ):
                raise EntityExistsError(
                    f"A local user named '{external.username}' already exists."
                ) from None
        credentials.link_external(user.id, external.id)
        user_id = user.id
    credential = credentials.get(user_id)
    if not credential.active:
        raise AuthenticationError("This user is inactive.")
    user = credentials.set_admin(user_id, external.is_superuser)
    return Principal("user", user.id, user.name, user.is_admin)
