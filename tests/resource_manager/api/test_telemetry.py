"""FastAPI's OpenTelemetry hooks are on only for the signals a provider is set up for."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from wharf.resource_manager.api import app as app_module


class TracerProvider:  # a set-up provider, as an SDK's would be named
    pass


def test_hooks_follow_the_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE", raising=False)
    assert app_module._telemetry() == {
        "telemetry": {"tracing": False, "metrics": False, "logs": False}
    }
    monkeypatch.setattr(trace, "get_tracer_provider", TracerProvider)
    assert app_module._telemetry()["telemetry"]["tracing"] is True
    monkeypatch.setenv("FASTAPI_OTEL_AUTO_CONFIGURE", "true")
    assert app_module._telemetry() == {}  # FastAPI sets them up: its defaults apply
