"""Users and projects over REST (``/api/v1/users``, ``/api/v1/projects``)."""

from __future__ import annotations

from uuid import UUID

from wharf.store.models import Page, PageRequest, ProjectRecord, UserRecord
from wharf.store.rest.http import HttpSession, page_params, utc

DEFAULT_PAGE = PageRequest()


class RestUserRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create(self, name: str, *, is_admin: bool = False) -> UserRecord:
        body = {"name": name, "is_admin": is_admin}
        return self._http.model(UserRecord, "POST", "/api/v1/users", body=body)

    def get(self, user_id: UUID) -> UserRecord:
        return self._http.model(UserRecord, "GET", f"/api/v1/users/{user_id}")

    def get_by_name(self, name: str) -> UserRecord:
        return self._http.model(UserRecord, "GET", "/api/v1/users/by-name", params={"name": name})

    def list(self, page: PageRequest = DEFAULT_PAGE) -> Page[UserRecord]:
        data = self._http.send("GET", "/api/v1/users", params=page_params(page))
        for item in data["items"]:
            item.pop("active", None)  # the listing's own: no field of the record
        listed: Page[UserRecord] = utc(Page[UserRecord].model_validate(data))
        return listed


class RestProjectRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create(self, name: str) -> ProjectRecord:
        return self._http.model(ProjectRecord, "POST", "/api/v1/projects", body={"name": name})

    def get(self, project_id: UUID) -> ProjectRecord:
        return self._http.model(ProjectRecord, "GET", f"/api/v1/projects/{project_id}")

    def get_by_name(self, name: str) -> ProjectRecord:
        params = {"name": name}
        return self._http.model(ProjectRecord, "GET", "/api/v1/projects/by-name", params=params)

    def list(self, page: PageRequest = DEFAULT_PAGE) -> Page[ProjectRecord]:
        return self._http.model(
            Page[ProjectRecord], "GET", "/api/v1/projects", params=page_params(page)
        )
