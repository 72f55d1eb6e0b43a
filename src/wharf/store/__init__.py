"""The metadata store: ports (one Protocol per aggregate), records, and their adapters.

``store.ports`` defines the behaviour every backend must have; ``store.sql`` implements it with
SQLAlchemy 2 on SQLite, PostgreSQL and MySQL/MariaDB; ``store.rest`` over HTTP (a workspace
server).
"""
