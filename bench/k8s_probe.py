"""The orchestrator pod's probe of ``bench/k8s_cached.py`` and ``bench/k8s_parallel.py``: the
source of a ``sitecustomize`` module that the bed puts on the kubelet's ``PYTHONPATH``.

Inert except in an orchestrator pod (``orchestrator_main`` on the command line) with
``WHARF_BENCH_PROBE_DIR`` set; there it counts the store calls (those made for cache decisions
apart), the SQL statements, the Kubernetes API calls, the slots freed and the step Jobs
created, and writes its record to that directory when the pod's process exits. What counts as
a cache decision is said in ``bench/k8s_cached.py``'s docstring.
"""

PROBE = r'''
"""Bench probe (bench/k8s_cached.py): counts what an orchestrator pod does; inert elsewhere."""
import os
import sys

_OUT = os.environ.get("WHARF_BENCH_PROBE_DIR")
if _OUT and any("orchestrator_main" in a for a in getattr(sys, "orig_argv", [])):
    import atexit
    import collections
    import json
    import resource
    import threading
    import time

    _started_wall = time.time()
    _ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/self/stat") as _f:
        _start_ticks = int(_f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as _f:
        _boot = next(int(l.split()[1]) for l in _f if l.startswith("btime"))
    _data = {
        "pid": os.getpid(),
        "process_start": _boot + _start_ticks / _ticks,
        "probe_start": _started_wall,
        "store_calls": collections.Counter(),
        "cache_decision_calls": collections.Counter(),
        "sql_statements": 0,
        "cache_decision_sql_statements": 0,
        "decision_batches": [],
        "kube_calls": collections.Counter(),
        "slots": [],
        "jobs_created": {},
    }
    _lock = threading.Lock()
    _local = threading.local()

    def _cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    class _Repo:
        def __init__(self, name, inner):
            self._name, self._inner = name, inner

        def __getattr__(self, attr):
            value = getattr(self._inner, attr)
            if not callable(value):
                return value
            key = f"{self._name}.{attr}"

            def counted(*args, **kwargs):
                with _lock:
                    _data["store_calls"][key] += 1
                    if getattr(_local, "deciding", 0):
                        _data["cache_decision_calls"][key] += 1
                return value(*args, **kwargs)

            return counted

    import wharf.execution.services as _services

    _open_store = _services.open_store

    def _counting_store(config):
        store = _open_store(config)
        for name in ("users", "projects", "stacks", "pipelines", "snapshots", "runs", "steps",
                     "artifacts", "run_metadata", "schedules"):
            if hasattr(store, name):
                setattr(store, name, _Repo(name, getattr(store, name)))
        return store

    _services.open_store = _counting_store

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _statement(statement):
        with _lock:
            _data["sql_statements"] += 1
            if getattr(_local, "deciding", 0):
                _data["cache_decision_sql_statements"] += 1

    @event.listens_for(Engine, "connect")
    def _trace(dbapi_connection, record):
        # Every statement SQLite runs on the connection (the store's direct statements bypass
        # SQLAlchemy's cursor events), BEGIN and COMMIT included.
        if hasattr(dbapi_connection, "set_trace_callback"):
            dbapi_connection.set_trace_callback(_statement)

    import wharf.execution.cache_decisions as _decisions
    import wharf.execution.launcher as _launcher

    def _deciding(method, first_only):
        def wrapped(self, *args, **kwargs):
            # _create_attempt(spec, inputs, key, attempt, previous): its first attempt only
            mark = not first_only or args[3] == 1
            if mark:
                _local.deciding = getattr(_local, "deciding", 0) + 1
            try:
                return method(self, *args, **kwargs)
            finally:
                if mark:
                    _local.deciding -= 1
        return wrapped

    _launcher.StepLauncher._create_attempt = _deciding(
        _launcher.StepLauncher._create_attempt, True
    )
    # A batch runs on whichever thread the combiner picks (a deciding step's, or one of its
    # own), and publishes the hits it found ahead: all of it is deciding.
    _decisions.CacheDecisions.run_batch = _deciding(_decisions.CacheDecisions.run_batch, False)
    _decisions.CacheDecisions.publish = _deciding(_decisions.CacheDecisions.publish, False)
    _store_call = _decisions.CacheDecisions._store_call

    def _batch(self, decisions, *, slotted, **kwargs):
        if not kwargs.get("record_hit"):  # a batch's lookup (its hits are recorded after)
            with _lock:
                _data["decision_batches"].append([slotted, len(decisions) - slotted])
        return _store_call(self, decisions, slotted=slotted, **kwargs)

    _decisions.CacheDecisions._store_call = _batch

    import wharf.execution.dag_runner as _dag

    _done = _dag._Schedule.done

    def _slot_done(self, name, result, on_failure):
        starts = _done(self, name, result, on_failure)
        now = time.time()
        end = getattr(getattr(result, "step_run", None), "end_time", None)
        with _lock:
            _data["slots"].append({
                "ended": name,
                "at": now,
                "cpu": _cpu(),
                "step_end_time": end.timestamp() if end is not None else None,
                "started": [s[0] for s in starts],
            })
        return starts

    _dag._Schedule.done = _slot_done

    import wharf.execution.run_loop as _loop

    _run_pipeline = _loop.run_pipeline

    def _timed_run_pipeline(*args, **kwargs):
        _data["loop_start"] = time.time()
        _data["loop_start_cpu"] = _cpu()
        try:
            return _run_pipeline(*args, **kwargs)
        finally:
            _data["loop_end"] = time.time()
            _data["loop_end_cpu"] = _cpu()

    _loop.run_pipeline = _timed_run_pipeline

    import kubernetes.client.rest as _rest

    _request = _rest.RESTClientObject.request

    def _kube_request(self, method, url, *args, **kwargs):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        path = parts.path.split("/")
        watch = "watch=true" in (parts.query or "") or "watch=True" in (parts.query or "")
        # resource kind: the segment after "namespaces/<ns>/" (plus a subresource)
        kind = path[-1]
        if "namespaces" in path:
            rest = path[path.index("namespaces") + 2:]
            kind = "/".join([rest[0]] + rest[2:]) if rest else "namespaces"
        key = f"{method} {kind}{' watch' if watch else ''}"
        body = kwargs.get("body")
        with _lock:
            _data["kube_calls"][key] += 1
        response = _request(self, method, url, *args, **kwargs)
        if method == "POST" and kind == "jobs" and isinstance(body, dict):
            step = (body.get("metadata", {}).get("labels") or {}).get("wharf.io/step")
            if step:
                with _lock:
                    _data["jobs_created"][step] = time.time()
        return response

    _rest.RESTClientObject.request = _kube_request

    def _write():
        _data["cpu_total"] = _cpu()
        _data["exit"] = time.time()
        path = os.path.join(_OUT, f"orchestrator-{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump(_data, f)

    atexit.register(_write)
'''
