"""Routers, one module per aggregate; each exposes ``build_router()`` (nothing at import time).

Route handlers are plain (sync) functions: FastAPI runs them in its thread pool, where the
synchronous store calls belong. They return ``json_response(...)`` of records already built by
the store, so responses are serialised once and never re-validated.
"""
