"""Authentication and authorization of the workspace server.

- ``tokens``: signed, expiring bearer tokens (HS256 JWTs): access tokens and run tokens;
- ``passwords``: argon2 hashing; ``api_keys``: key format, generation and digests;
- ``external``: token introspection at an external identity provider;
- ``principal``: who a request is, resolved by ``authenticate``;
- ``access``: the RBAC rules (global admin, project roles, run scope).
"""
