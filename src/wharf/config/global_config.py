"""Where Wharf keeps its state on this machine, and which store and stack it uses:
:func:`load_config` resolves a :class:`WharfConfig`; the user config file is
``<home>/config.json`` (``WHARF_HOME`` moves everything; tests use it).

Invariants: every value resolves as explicit argument > environment variable > user config
file > default; a numeric value is finite and within what it feeds (else refused in one line
naming where it came from and the range); the config file can hold a bearer credential, so it
is written 0600 in a 0700 home, atomically, never readable by others even briefly
(:func:`write_private_file`); one that is not UTF-8 JSON is refused in one line naming it.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from wharf.config.liveness import (
    LONGEST_HEARTBEAT_INTERVAL_SECONDS,
    SHORTEST_HEARTBEAT_INTERVAL_SECONDS,
)
from wharf.core.errors import InputError

SERVER_URL_ENV = "WHARF_SERVER_URL"
API_KEY_ENV = "WHARF_API_KEY"
"""The credential sent to the server: an access token, an API key, or a run-scoped token."""

PRIVATE_DIRECTORY_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
"""The config file may hold a credential (``api_key``): it and its directory are the owner's."""

LARGEST_LOCAL_STEP_SLOTS = 2**31 - 1
"""The most ``WHARF_LOCAL_STEP_SLOTS`` may be: the embedded Resource Manager stores it as the
``local`` pool's concurrency limit, a 32-bit column (``MAX_STORED_INT`` of its pools)."""

LOGGING_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOGGING_FORMATS = ("text", "json")


class WharfConfig(BaseModel):
    """The resolved configuration of one process. Build with :func:`load_config`."""

    model_config = ConfigDict(frozen=True)

    home: Path
    store_url: str
    artifact_root: Path
    active_stack: str | None = None
    server_url: str | None = None
    api_key: str | None = None
    project: str | None = None
    """The project pipelines run in and the client works in (``WHARF_PROJECT``, ``wharf login
    --project``); None: the default project."""
    heartbeat_interval: float = 15.0
    """Seconds between a running step's heartbeats (``WHARF_HEARTBEAT_INTERVAL``): more than 0,
    at most ``wharf.config.liveness.LONGEST_HEARTBEAT_INTERVAL_SECONDS``."""
    resource_manager: str = "embedded"
    """``embedded`` (in-process, in the store's database) or ``none``
    (``WHARF_RESOURCE_MANAGER``)."""
    local_step_slots: int | None = None
    """Concurrent isolated steps the ``local`` pool admits; default: one per CPU
    (``WHARF_LOCAL_STEP_SLOTS``)."""
    logging_verbosity: str | None = None
    """Level of Wharf's log (``WHARF_LOGGING_VERBOSITY``: one of :data:`LOGGING_LEVELS`); None:
    INFO where Wharf sets up its own log output, else whatever the application configured."""
    logging_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per line on stderr (``WHARF_LOGGING_FORMAT``)."""

    code_archive_limit_mib: float = 64.0
    """Largest pipeline source (MiB of files) packaged into a code archive
    (``WHARF_CODE_ARCHIVE_LIMIT_MIB``)."""

    @property
    def config_file(self) -> Path:
        return self.home / "config.json"

    @property
    def code_cache(self) -> Path:
        """Where this machine keeps unpacked code archives, one directory per digest."""
        return self.home / "code-cache"

    @property
    def code_hashes(self) -> Path:
        """Where this machine remembers the hashes of the code it packaged (by source root)."""
        return self.home / "code-hashes"


def default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("wharf", appauthor=False))


def read_user_config(home: Path) -> dict[str, Any]:
    path = home / "config.json"
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        raise InputError(f"Cannot read Wharf config file {path}: {exc.strerror}.") from None
    if mode & 0o077:  # readable by others (0644): it may hold a credential
        _tighten(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a byte order mark from an editor is fine
    except OSError as exc:
        raise InputError(f"Cannot read Wharf config file {path}: {exc.strerror}.") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"Wharf config file {path} is not valid UTF-8 text (at byte {exc.start + 1}): "
            "fix it, or delete it and log in again."
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"Wharf config file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}): fix it, or delete it and log in again."
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"Wharf config file {path} must hold a JSON object.")
    return data


def write_user_config(home: Path, updates: Mapping[str, Any]) -> None:
    """Merge ``updates`` into the user config file (a None value removes the key)."""
    data = read_user_config(home)
    for key, value in updates.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = home / "config.json"
    try:
        write_private_file(path, json.dumps(data, indent=2, sort_keys=True))
    except OSError as exc:
        raise InputError(f"Cannot write Wharf config file {path}: {exc.strerror}.") from None


def private_directory(path: Path) -> None:
    """Make ``path`` (and missing parents) if needed; the directory itself is left readable
    only by its owner (0700: others may not list or open what it holds)."""
    path.mkdir(mode=PRIVATE_DIRECTORY_MODE, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        path.chmod(mode & PRIVATE_DIRECTORY_MODE)


def write_private_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, readable only by its owner (0600) from the
    first byte on: written to a new 0600 file in a 0700 directory, then renamed over it."""
    private_directory(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _tighten(path: Path) -> None:
    """Make a config file readable by others private (its directory too), if ours (on read)."""
    try:
        private_directory(path.parent)
        path.chmod(PRIVATE_FILE_MODE)
    except OSError:
        pass  # not ours to change: it is read all the same


def load_config(environ: Mapping[str, str] | None = None, **overrides: Any) -> WharfConfig:
    """The configuration of this process: ``overrides`` > ``environ`` > the user config file >
    defaults.

    Environment variables: ``WHARF_HOME``, ``WHARF_STORE_URL``, ``WHARF_ARTIFACT_ROOT``,
    ``WHARF_ACTIVE_STACK``, ``WHARF_SERVER_URL``, ``WHARF_API_KEY``, ``WHARF_PROJECT``,
    ``WHARF_HEARTBEAT_INTERVAL``, ``WHARF_RESOURCE_MANAGER``, ``WHARF_LOCAL_STEP_SLOTS``,
    ``WHARF_LOGGING_VERBOSITY``, ``WHARF_LOGGING_FORMAT``, ``WHARF_CODE_ARCHIVE_LIMIT_MIB``.
    The home directory is created when the default store (``<home>/wharf.db``) is chosen; a
    store URL given explicitly must name an existing directory (the store refuses to make one).
    """
    env = os.environ if environ is None else environ
    home = Path(overrides.get("home") or env.get("WHARF_HOME") or default_home()).expanduser()
    user = read_user_config(home)

    def pick(key: str, env_name: str, default: Any = None) -> Any:
        if overrides.get(key) is not None:
            return overrides[key]
        if env.get(env_name):
            return env[env_name]
        return user.get(key, default)

    def origin(key: str, env_name: str) -> str:
        """Where ``pick(key, env_name)`` took its value from, for a message about a bad one."""
        if overrides.get(key) is not None:
            return f"The {key} argument"
        if env.get(env_name) or key not in user:
            return env_name
        return f"'{key}' in {home / 'config.json'}"

    default_store = f"sqlite:///{home / 'wharf.db'}"
    store_url = pick("store_url", "WHARF_STORE_URL", default_store)
    if store_url == default_store:  # the default store's directory is Wharf's own to make
        _make_home(home)
    return WharfConfig(
        home=home,
        store_url=store_url,
        # absolute where it is read: the default stack records it, and a relative path would
        # put each process's artifact store under its own working directory
        artifact_root=Path(
            os.path.abspath(
                Path(pick("artifact_root", "WHARF_ARTIFACT_ROOT", home / "artifacts")).expanduser()
            )
        ),
        active_stack=pick("active_stack", "WHARF_ACTIVE_STACK"),
        server_url=pick("server_url", SERVER_URL_ENV),
        api_key=pick("api_key", API_KEY_ENV),
        project=pick("project", "WHARF_PROJECT"),
        resource_manager=pick("resource_manager", "WHARF_RESOURCE_MANAGER", "embedded"),
        local_step_slots=_optional_int(
            pick("local_step_slots", "WHARF_LOCAL_STEP_SLOTS"),
            origin("local_step_slots", "WHARF_LOCAL_STEP_SLOTS"),
            LARGEST_LOCAL_STEP_SLOTS,
        ),
        logging_verbosity=_choice(
            pick("logging_verbosity", "WHARF_LOGGING_VERBOSITY"),
            origin("logging_verbosity", "WHARF_LOGGING_VERBOSITY"),
            LOGGING_LEVELS,
        ),
        logging_format=_choice(
            pick("logging_format", "WHARF_LOGGING_FORMAT"),
            origin("logging_format", "WHARF_LOGGING_FORMAT"),
            LOGGING_FORMATS,
        )
        or "text",
        heartbeat_interval=_positive_float(
            pick("heartbeat_interval", "WHARF_HEARTBEAT_INTERVAL", 15.0),
            origin("heartbeat_interval", "WHARF_HEARTBEAT_INTERVAL"),
            "seconds",
            LONGEST_HEARTBEAT_INTERVAL_SECONDS,
            SHORTEST_HEARTBEAT_INTERVAL_SECONDS,
        ),
        code_archive_limit_mib=_positive_float(
            pick("code_archive_limit_mib", "WHARF_CODE_ARCHIVE_LIMIT_MIB", 64.0),
            origin("code_archive_limit_mib", "WHARF_CODE_ARCHIVE_LIMIT_MIB"),
            "MiB",
        ),
    )


def _make_home(home: Path) -> None:
    try:
        home.mkdir(mode=PRIVATE_DIRECTORY_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"Cannot create Wharf's home directory {home}: {exc.strerror}.") from None


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> Any:
    """``value`` as one of ``choices`` (case-insensitive); None if unset."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise InputError(f"{name} must be one of {', '.join(choices)}, not '{value}'.")


def _optional_int(value: Any, name: str, largest: int) -> int | None:
    """``value`` as a whole number from 1 to ``largest``; None if unset. A fraction, a truth
    value, infinity or NaN (a JSON config file may hold any) is refused, not rounded."""
    if value is None or value == "":
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            number = None
    if number is None or not 1 <= number <= largest:
        raise InputError(f"{name} must be a whole number from 1 to {largest}, not '{value}'.")
    return number


def _positive_float(
    value: Any, name: str, unit: str = "seconds", largest: float = math.inf, smallest: float = 0.0
) -> float:
    """``value`` as a finite number greater than 0, at least ``smallest`` and at most
    ``largest``. NaN, infinity and truth values are refused (``float()`` takes ``nan``, ``inf``
    and ``True``)."""
    if smallest > 0:
        allowed = f"between {smallest} and {largest}"
    else:
        allowed = "greater than 0" + ("" if largest == math.inf else f" and at most {largest}")
    refusal = f"{name} must be a finite number of {unit} {allowed}, not '{value}'."
    if isinstance(value, bool):
        raise InputError(refusal)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(refusal) from None
    if not (math.isfinite(number) and 0 < number <= largest and number >= smallest):
        raise InputError(refusal)
    return number
