"""The API's routers, one module per resource; :mod:`..app` mounts them all."""
