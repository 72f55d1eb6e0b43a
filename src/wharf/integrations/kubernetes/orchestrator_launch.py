"""What the orchestrator pod of a run is started with: its names, command and environment.

Pure functions shared by the submitting side (``orchestrator``) and the orchestrator pod
(``orchestrator_main``), which parses the command line built here.

Invariants: the pod's environment (:func:`pod_environment`) is the run's ``child_env`` without
the submitting machine's paths, and a credential in it (``SECRET_ENV``) never appears as a plain
value; names are valid Kubernetes resource names, derived from the run so that a resubmission of
the same run finds the same objects.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from wharf.config.global_config import API_KEY_ENV
from wharf.integrations.kubernetes.labels import resource_name
from wharf.integrations.kubernetes.manifests import (
    ORCHESTRATOR_COMMAND,
    ORCHESTRATOR_MODULE,
    TOKEN_KEY,
    SecretEnv,
)
from wharf.integrations.kubernetes.step_backend_secret import SECRET_ENV, STORE_URL_ENV

TOKEN_SECRET_KEY = TOKEN_KEY
"""The key of the run token in the run's Secret."""
SECRET_KEYS = {API_KEY_ENV: TOKEN_SECRET_KEY, STORE_URL_ENV: "store-url"}
"""The key of each credential variable in the orchestrator pod's Secret (others: its name)."""
RUN_ENDED_UNCOMPLETED = 1
"""The orchestrator pod's exit code when the run ended other than completed: the Job fails
at once (a new pod would find the run ended)."""
FAILED_BEFORE_THE_RUN = 3
"""Its exit code when it failed before running the run (the Job may start another pod)."""
SUBMITTER_ONLY_ENV = frozenset({"PYTHONPATH", "WHARF_HOME", "WHARF_ARTIFACT_ROOT"})
"""Variables of ``child_env`` that name paths of the submitting machine only: a pod has its
image's own (its Wharf home, where code archives are unpacked, is the image's to choose)."""
DEFAULT_JOB_PREFIX = "wharf"


def secret_key(variable: str) -> str:
    """The key of credential ``variable`` in the orchestrator pod's Secret."""
    return SECRET_KEYS.get(variable, variable)


@dataclass(frozen=True)
class PodEnvironment:
    env: dict[str, str]
    """Plain environment variables (never a credential)."""
    secrets: dict[str, str] = field(default_factory=dict)
    """Credential variables (``SECRET_ENV``) and their values, to travel in a Secret."""

    @property
    def token(self) -> str | None:
        """The run-scoped credential (None: the store needs none)."""
        return self.secrets.get(API_KEY_ENV)

    def secret_data(self) -> dict[str, str]:
        """The Secret's content: each credential under its :func:`secret_key`."""
        return {secret_key(variable): value for variable, value in self.secrets.items()}

    def secret_env(self, secret: str) -> SecretEnv:
        """The pod's references to each credential in the Secret named ``secret``."""
        return {variable: (secret, secret_key(variable)) for variable in self.secrets}


def pod_environment(child_env: Mapping[str, str]) -> PodEnvironment:
    """Split ``child_env`` into the orchestrator pod's plain variables and its credentials.

    The paths of the submitting machine (``SUBMITTER_ONLY_ENV``) are left out: the pipeline's
    code travels in the run's code archive, the Wharf home is the image's. Credentials
    (``SECRET_ENV``: ``WHARF_API_KEY``, a token scoped to the run, and ``WHARF_STORE_URL``,
    which may hold a database password) are split out to travel in a Kubernetes Secret the pod
    refers to (``secretKeyRef``), each variable under its own key (:func:`secret_key`)."""
    kept = {key: value for key, value in child_env.items() if key not in SUBMITTER_ONLY_ENV}
    return PodEnvironment(
        env={key: value for key, value in kept.items() if key not in SECRET_ENV},
        secrets={key: value for key, value in kept.items() if key in SECRET_ENV},
    )


def orchestrator_job_name(prefix: str | None, pipeline: str, run_id: UUID) -> str:
    """The orchestrator Job's name: prefix, pipeline and the run's id (short form)."""
    return resource_name(prefix or DEFAULT_JOB_PREFIX, pipeline, run_id.hex[:10])


def token_secret_name(run_id: UUID) -> str:
    """The run's Secret: the credentials of its orchestrator pod (run token, store URL)."""
    return resource_name("wharf-run-env", run_id.hex)


@dataclass(frozen=True)
class OrchestratorArgs:
    """What the orchestrator pod's command line says."""

    snapshot_id: UUID
    run_id: UUID | None
    """The run the submitter recorded (a placeholder); None: the pod creates one (schedules)."""
    namespace: str
    job_name: str
    """The pod's own Job: the owner of the step Jobs, and where its run id comes from."""
    settings_json: str
    """The orchestrator's settings (``KubernetesOrchestratorSettings``) as JSON."""
    token_secret: str | None
    """The run's Secret (its credentials: run token, store URL), deleted by the pod at the
    run's end (None: none)."""


def orchestrator_arguments(args: OrchestratorArgs) -> list[str]:
    """The orchestrator container's arguments (after ``python -m`` and the module)."""
    arguments = ["--snapshot-id", str(args.snapshot_id)]
    if args.run_id is not None:
        arguments += ["--run-id", str(args.run_id)]
    arguments += ["--namespace", args.namespace, "--job-name", args.job_name]
    arguments += ["--settings", args.settings_json]
    if args.token_secret is not None:
        arguments += ["--token-secret", args.token_secret]
    return arguments


def orchestrator_command(args: OrchestratorArgs) -> list[str]:
    """The orchestrator container's whole command line."""
    return [*ORCHESTRATOR_COMMAND, *orchestrator_arguments(args)]


def parse_orchestrator_args(argv: Sequence[str]) -> OrchestratorArgs:
    """The inverse of :func:`orchestrator_command` (its arguments after the module name);
    exits with status 2 and a usage line on a malformed command line."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {ORCHESTRATOR_MODULE}",
        description="Run one Wharf pipeline run's steps as Kubernetes Jobs.",
    )
    parser.add_argument("--snapshot-id", required=True, type=UUID)
    parser.add_argument("--run-id", type=UUID, default=None)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--job-name", required=True)
    parser.add_argument("--settings", required=True)
    parser.add_argument("--token-secret", default=None)
    parsed = parser.parse_args(list(argv))
    return OrchestratorArgs(
        snapshot_id=parsed.snapshot_id,
        run_id=parsed.run_id,
        namespace=parsed.namespace,
        job_name=parsed.job_name,
        settings_json=parsed.settings,
        token_secret=parsed.token_secret,
    )
