"""The Resource Manager's HTTP API (FastAPI).

Public API:

- :func:`create_app` (``wharf.resource_manager.api.app``) — the application for one
  :class:`ApiSettings`; nothing is created at import time;
- :class:`ApiSettings`, :class:`Credential`, :func:`load_credentials_file` — who may log in and
  how the server runs (see :mod:`.settings` for the credential design);
- :func:`run` (``wharf.resource_manager.api.serve``) — uvicorn, one or several workers.

The API may use the service; the workspace server and the engine never import this package
(import-linter): they reach the RM through the client interface of
:mod:`wharf.resource_manager.contract`, whose models and errors this API speaks too.
"""

from wharf.resource_manager.api.settings import ApiSettings, Credential, load_credentials_file

__all__ = ["ApiSettings", "Credential", "load_credentials_file"]
