"""The workspace server: the metadata store over REST, with users, API keys and project RBAC.

Layout (Prefect-style layering; nothing is built at import time):

- ``settings``: :class:`ServerSettings`, passed explicitly to :func:`wharf.server.app.create_app`;
- ``app``: the app factory, lifespan (opens the database, bootstrap) and middleware wiring;
- ``errors``: the one place where Wharf errors become HTTP statuses with a JSON ``detail``;
- ``limits``: body size and URI length limits (413 / 414) as ASGI middleware;
- ``schemas``: wire models split by role (``actions`` bodies, ``responses``, ``filters``);
- ``auth``: tokens, password hashing, API keys, external identity, principals and access checks;
- ``routers``: one module per aggregate, all under ``/api/v1``;
- ``serve`` / ``daemon``: running it (uvicorn, workers) in the foreground or in the background.
"""
