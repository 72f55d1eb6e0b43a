"""The embedded Resource Manager: in this process, over the service, in the workspace database.

Owns:

- :mod:`.inprocess`: :class:`~.inprocess.InProcessResourceManager`, the
  :class:`~wharf.resource_manager.contract.ResourceManagerClient` over a service in this process;
- :mod:`.connect`: :func:`~.connect.connect_embedded`, the wiring the ``embedded`` resource
  manager mode names (``wharf.config.flavors.RESOURCE_MANAGERS``);
- :mod:`.local_pool`: the ``local`` pool describing this machine, and its policy;
- :mod:`.machine`: what this machine offers (CPUs, memory, NVIDIA GPUs).

Nothing is re-exported here on purpose: :mod:`.inprocess` and :mod:`.connect` pull in the
service (and SQLAlchemy), which a step process asking only for this machine's GPUs
(:mod:`.machine`, standard library only) must not pay for.
"""
