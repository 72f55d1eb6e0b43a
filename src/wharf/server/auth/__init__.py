"""Authentication and authorization of the workspace server.

- ``tokens`` / ``issue``: signed, expiring bearer tokens (HS256 JWTs): access, run and schedule
  tokens; ``passwords``: argon2 hashing; ``api_keys``: key format, generation and digests;
- ``external``: token introspection at an external identity provider;
- ``principal``: who a request is, resolved by ``authenticate`` (cached by ``cache``);
- ``access``: the RBAC rules (global admin, project roles, run and schedule scope), with
  ``own_run`` / ``own_schedule`` for what scoped tokens may do.
"""
