"""The Resource Manager's HTTP API (FastAPI).

Public API: :func:`create_app` (the application for one :class:`ApiSettings`; nothing is
created at import time), :class:`ApiSettings`, :class:`Credential`,
:func:`load_credentials_file` (see :mod:`.settings`), and :func:`run` (uvicorn, one or several
workers).

Invariant: the API may use the service; the workspace server and the engine never import this
package (import-linter): they reach the RM through :mod:`wharf.resource_manager.contract`.
"""

from wharf.resource_manager.api.settings import ApiSettings, Credential, load_credentials_file

__all__ = ["ApiSettings", "Credential", "load_credentials_file"]
