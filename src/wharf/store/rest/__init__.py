"""The metadata store over HTTP: an httpx client of the workspace server (``wharf.server``)
implementing every Protocol of ``wharf.store.ports``.

- ``http``: the session (pooled connections, auth header, JSON, error conversion);
- ``errors``: HTTP errors back to the Wharf error types (plus 401/403/413/414 classes);
- one module per resource; ``store``: the :class:`RestStore` bundle; ``session``: login/logout.
"""

from wharf.store.rest.store import RestStore

__all__ = ["RestStore"]
