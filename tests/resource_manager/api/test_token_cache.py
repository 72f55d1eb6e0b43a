"""A verified token is remembered, but its expiry is checked on every call."""

from __future__ import annotations

import pytest

from wharf.resource_manager.api import tokens
from wharf.resource_manager.api.tokens import TokenSigner
from wharf.resource_manager.contract.errors import AuthenticationError
from wharf.resource_manager.service import Principal


def test_remembered_tokens_still_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    signer = TokenSigner(b"k" * 32, ttl_seconds=60, clock=lambda: now[0])
    token, _ = signer.issue(Principal("alice"))
    assert signer.verify(token) == Principal("alice")
    checked: list[str] = []
    check = signer._check
    monkeypatch.setattr(signer, "_check", lambda t: checked.append(t) or check(t))
    assert signer.verify(token) == Principal("alice") and checked == []  # remembered
    now[0] += 60
    with pytest.raises(AuthenticationError, match="expired"):
        signer.verify(token)
    with pytest.raises(AuthenticationError, match="signature"):
        signer.verify(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "VERIFIED_KEPT", 3)
    signer = TokenSigner(b"k" * 32, ttl_seconds=60)
    for n in range(10):
        signer.verify(signer.issue(Principal(f"user{n}"))[0])
    assert len(signer._verified) <= 3
