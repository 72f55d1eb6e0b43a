"""Stack components and stacks over REST (``/api/v1/components``, ``/api/v1/stacks``)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from wharf.core.enums import ComponentType
from wharf.store.models import ComponentCreate, ComponentRecord, Page, PageRequest, StackRecord
from wharf.store.rest.http import HttpSession, page_params

DEFAULT_PAGE = PageRequest()


class RestStackRepository:
    def __init__(self, http: HttpSession) -> None:
        self._http = http

    def create_component(self, component: ComponentCreate) -> ComponentRecord:
        return self._http.model(ComponentRecord, "POST", "/api/v1/components", body=component)

    def get_component(self, component_id: UUID) -> ComponentRecord:
        return self._http.model(ComponentRecord, "GET", f"/api/v1/components/{component_id}")

    def get_component_by_name(self, type: ComponentType, name: str) -> ComponentRecord:
        params = {"type": ComponentType(type).value, "name": name}
        return self._http.model(ComponentRecord, "GET", "/api/v1/components/by-name", params=params)

    def list_components(
        self, type: ComponentType | None = None, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ComponentRecord]:
        params = {**page_params(page), "type": None if type is None else ComponentType(type).value}
        return self._http.model(Page[ComponentRecord], "GET", "/api/v1/components", params=params)

    def create_stack(self, name: str, components: dict[ComponentType, UUID]) -> StackRecord:
        body = {
            "name": name,
            "components": {ComponentType(k).value: str(v) for k, v in components.items()},
        }
        return self._http.model(StackRecord, "POST", "/api/v1/stacks", body=body)

    def get_stack(self, stack_id: UUID) -> StackRecord:
        return self._http.model(StackRecord, "GET", f"/api/v1/stacks/{stack_id}")

    def get_stack_by_name(self, name: str) -> StackRecord:
        params = {"name": name}
        return self._http.model(StackRecord, "GET", "/api/v1/stacks/by-name", params=params)

    def list_stacks(self, page: PageRequest = DEFAULT_PAGE) -> Page[StackRecord]:
        return self._http.model(
            Page[StackRecord], "GET", "/api/v1/stacks", params=page_params(page)
        )

    def update_component(
        self, component_id: UUID, configuration: dict[str, Any]
    ) -> ComponentRecord:
        body = {"configuration": configuration}
        path = f"/api/v1/components/{component_id}"
        return self._http.model(ComponentRecord, "PATCH", path, body=body)

    def delete_component(self, component_id: UUID) -> None:
        self._http.send("DELETE", f"/api/v1/components/{component_id}")

    def delete_stack(self, stack_id: UUID) -> None:
        self._http.send("DELETE", f"/api/v1/stacks/{stack_id}")
