"""The workspace server: the metadata store over REST, with users, API keys and project RBAC.

Modules (nothing is built at import time): ``settings`` (:class:`ServerSettings`, passed to
:func:`wharf.server.app.create_app`), ``app`` (factory, lifespan, middleware wiring, with the
body and URI limits of ``wharf.request_limits``), ``errors`` (errors as HTTP responses),
``schemas`` (wire models by role), ``auth`` (credentials, principals, access checks),
``routers`` (one per aggregate, under ``/api/v1``), ``serve`` / ``daemon`` (running it).
"""
