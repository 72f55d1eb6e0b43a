"""The embedded Resource Manager: in this process, over the service, in the workspace database.

Modules: :mod:`.inprocess` (:class:`~.inprocess.InProcessResourceManager`, the
:class:`~wharf.resource_manager.contract.ResourceManagerClient` over a service in this process),
:mod:`.connect` (:func:`~.connect.connect_embedded`, the wiring the ``embedded`` resource manager
mode names in ``wharf.config.flavors.RESOURCE_MANAGERS``), :mod:`.local_pool` (the ``local``
pool describing this machine, and its policy), :mod:`.machine` (CPUs, memory, NVIDIA GPUs).

Invariant: nothing is re-exported here, so a step process asking only for this machine's GPUs
(:mod:`.machine`, standard library only) does not pay for the service and SQLAlchemy.
"""
