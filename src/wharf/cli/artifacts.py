"""``wharf artifacts list [--versions]`` and ``wharf artifacts load NAME [--version N]``.

``artifacts load`` prints the value of one version of an artifact (the latest unless
``--version`` names one), loaded as a step would load it; a ``str`` is printed as it is, any
other value in its ``pprint`` form (a dict in its own order, not sorted). Bytes are not
printed: ``--out FILE`` writes them (and any other value: a ``str`` as UTF-8 text, other values
in their printed form, a numpy array or pandas table unabridged) to a new file.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wharf.cli.output import OUTPUT_OPTION, emit, paged

if TYPE_CHECKING:
    from wharf.cli.reads import Reads
    from wharf.sdk.client import Client
    from wharf.store.models import ArtifactVersionRecord

_VERSIONS_PAGE = 200
"""Artifact versions read per store call while looking for a ``--version``."""
_ARTIFACTS_HINT = "a pipeline run stores its steps' outputs as artifacts."


@click.group()
def artifacts() -> None:
    """List artifacts and their versions; load a version's value."""


@artifacts.command("list")
@click.option("--name", help="Only this artifact (its whole name: PIPELINE::STEP::OUTPUT).")
@click.option("--versions", is_flag=True, help="List artifact versions instead of artifacts.")
@paged
@OUTPUT_OPTION
def list_artifacts(name: str | None, versions: bool, page: int, size: int, output: str) -> None:
    """List artifacts (or artifact versions), newest first."""
    from wharf.cli.reads import read

    if versions:
        vresult = read(lambda r: r.list_artifact_versions(name=name, page=page, size=size))
        emit(
            vresult.items,
            ("name", "version", "data_type", "uri", "id"),
            output,
            title="Artifact versions",
            total=vresult.total,
            filtered=name is not None,
            hint=_ARTIFACTS_HINT,
        )
        total = vresult.total
    else:
        result = read(lambda r: r.list_artifacts(name=name, page=page, size=size))
        emit(
            result.items,
            ("name", "created", "id"),
            output,
            title="Artifacts",
            total=result.total,
            filtered=name is not None,
            hint=_ARTIFACTS_HINT,
        )
        total = result.total
    if name is not None and total == 0:  # a part of a name, or a typo: say which it may be
        similar = read(lambda r: _similar_names(r, name))
        if similar:
            from wharf.cli.error_text import shown_value

            shown = shown_value(name)
            click.echo(f"No artifact named '{shown}'; {_did_you_mean(similar)}", err=True)


@artifacts.command("load", short_help="Print (or write to a file) an artifact version's value.")
@click.argument("name")
@click.option(
    "--version",
    "number",
    type=click.IntRange(min=1),
    help="The version number (as 'wharf artifacts list --versions' shows); default: the latest.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the value to this new file instead of printing it (needed for bytes).",
)
def load_artifact(name: str, number: int | None, out: Path | None) -> None:
    """Load version --version (default: the latest) of the artifact NAME and print its value:
    a str as it is, any other value in its pprint form; with --out, write it to a new file
    (bytes as they are, a str as UTF-8 text, other values in their printed form, a big numpy
    array or pandas table with every item). NAME is an artifact's name
    (PIPELINE::STEP::OUTPUT, as 'wharf artifacts list' shows), its id or id prefix, or the id
    (prefix) of one artifact version."""
    from wharf.artifacts.materializers.registry import ScriptClassError, UnresolvedClassError
    from wharf.core.errors import MaterializationError
    from wharf.sdk.client import Client

    if out is not None and str(out) in ("", "."):  # click makes "" the current directory
        raise click.BadParameter("is empty: name a new file.", param_hint="'--out'")
    if out is not None and out.exists():
        raise click.ClickException(f"'{out}' exists already; name a new file with --out.")

    with Client() as client:
        version = _version_of(client, name, number)
        try:
            value = client.load_artifact(version)
        except ScriptClassError as exc:  # only that script has the class
            raise click.ClickException(
                f"{exc} To read this version, run wharf.Client().load_artifact('{version.id}') "
                f"in {exc.script}."
            ) from None
        except UnresolvedClassError as exc:  # "import it first": not in this command
            raise click.ClickException(
                f"{exc} 'wharf artifacts load' never imports a recorded class path: load it in "
                "Python where that class is defined (the pipeline's script, or after importing "
                f"its module) with wharf.Client().load_artifact('{version.id}')."
            ) from None
        except MaterializationError as exc:
            missing = _missing_module(exc)
            if missing is None:
                raise
            raise click.ClickException(  # a pickle names its classes' modules; none is ours
                f"{exc}. 'wharf artifacts load' imports your modules only from its path: run it "
                f"where module '{missing}' is importable (from your project's directory: "
                "PYTHONPATH=. wharf artifacts load ...)."
            ) from None
    if out is None:
        if isinstance(value, bytes | bytearray):
            raise click.ClickException(
                f"Version {version.version} of artifact '{name}' holds {len(value)} bytes of "
                "binary data; write them to a file with --out FILE."
            )
        click.echo(_printed(value), nl=not (isinstance(value, str) and value.endswith("\n")))
        return
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
    else:
        with _unabridged():
            data = _printed(value).encode()
    try:
        file = out.open("xb")
    except OSError as exc:
        raise click.ClickException(f"Cannot write '{out}': {exc.strerror or exc}.") from None
    try:
        with file:
            file.write(data)
    except BaseException as exc:  # a full disk, Ctrl-C: the file is ours and partial, so it goes
        with contextlib.suppress(OSError):
            out.unlink()
        if not isinstance(exc, OSError):
            raise
        raise click.ClickException(f"Cannot write '{out}': {exc.strerror or exc}.") from None
    click.echo(f"Wrote version {version.version} of artifact '{name}' to {out}.", err=True)


def _missing_module(error: BaseException) -> str | None:
    """The name of the module whose absence made loading fail, if that was the cause."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            return cause.name
        cause = cause.__cause__
    return None


@contextlib.contextmanager
def _unabridged() -> Iterator[None]:
    """numpy and pandas print a big array or table abridged (``...``): fine on a terminal, a
    silent loss in a file. Within this block they print every item (only if already imported:
    loading the value imported them)."""
    with contextlib.ExitStack() as stack:
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            stack.enter_context(numpy.printoptions(threshold=sys.maxsize))
        pandas = sys.modules.get("pandas")
        if pandas is not None:
            unlimited = ("max_rows", "max_columns", "max_colwidth", "width", "max_seq_items")
            options = [part for key in unlimited for part in (f"display.{key}", None)]
            stack.enter_context(pandas.option_context(*options))
        yield


def _printed(value: Any) -> str:
    """A str as it is, any other value in its pprint form, every digit of a big int included
    (Python refuses to print more than 4,300 unless told)."""
    import pprint

    if isinstance(value, str):
        return value
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:  # sort_dicts=False: a dict is printed in its own order, as it was stored
        return pprint.pformat(value, sort_dicts=False)
    finally:
        sys.set_int_max_str_digits(limit)


def _version_of(client: Client, name: str, number: int | None) -> ArtifactVersionRecord:
    """The version ``number`` of the artifact ``name`` (None: its latest); a one-line
    ``EntityNotFoundError`` if the artifact or that version does not exist."""
    from wharf.core.errors import EntityNotFoundError
    from wharf.core.ids import parse_id_prefix

    page = 1
    latest: int | None = None
    while True:
        found = client.list_artifact_versions(name=name, page=page, size=_VERSIONS_PAGE)
        for version in found.items:
            latest = version.version if latest is None else max(latest, version.version)
            if number is None or version.version == number:  # newest first: the latest
                return version
        if page * _VERSIONS_PAGE >= found.total or not found.items:
            break
        page += 1
    if latest is None:
        by_id = _version_by_id(client, name, number)
        if by_id is not None:
            return by_id
        also = (
            ", and no artifact or artifact version has an id that starts so"
            if parse_id_prefix(name) is not None
            else ""
        )
        similar = _similar_names(client, name)
        hint = (
            f"; {_did_you_mean(similar)}"
            if similar
            else " (wharf artifacts list shows the artifacts)."
        )
        raise EntityNotFoundError(f"No artifact named '{name}'{also}{hint}")
    raise EntityNotFoundError(
        f"Artifact '{name}' has no version {number}; its latest version is {latest}."
    )


_SUGGESTED = 3
"""At most this many artifact names are suggested for one not found."""


def _did_you_mean(names: list[str]) -> str:
    return f"did you mean {' or '.join(repr(n) for n in names)}?"


def _similar_names(reads: Reads, name: str) -> list[str]:
    """Names of artifacts (among the newest page) that ``name`` may have meant: those it is a
    part of between ``::`` (``mean`` or ``training::mean`` for ``training::mean::output``),
    else the closest spellings (a typo)."""
    import difflib

    names = [a.name for a in reads.list_artifacts(size=_NAMES_PAGE).items]
    parts = name.split("::")
    found = [
        n
        for n in names
        if any(n.split("::")[i : i + len(parts)] == parts for i in range(n.count("::") + 1))
    ]
    return (found or difflib.get_close_matches(name, names, n=_SUGGESTED, cutoff=0.9))[:_SUGGESTED]


_NAMES_PAGE = 1000
"""Artifact names read to suggest one (the newest)."""


def _version_by_id(client: Client, text: str, number: int | None) -> ArtifactVersionRecord | None:
    """The version ``text`` names by id (or id prefix): the latest (or ``number``) of the
    artifact with that id, or the artifact version with that id; None if no id starts so."""
    from wharf.core.errors import AmbiguousIdError, InputError
    from wharf.core.ids import MAX_ID_CANDIDATES, only_match, parse_id_prefix
    from wharf.store.models import ArtifactFilter, ArtifactVersionFilter, PageRequest

    prefix = parse_id_prefix(text)
    if prefix is None:
        return None
    candidates = PageRequest(size=MAX_ID_CANDIDATES + 1)
    artifacts = client.store.artifacts.list(
        ArtifactFilter(project_id=client.project_id, id_prefix=prefix), candidates
    )
    versions = client.store.artifacts.list_versions(
        ArtifactVersionFilter(project_id=client.project_id, id_prefix=prefix), candidates
    )
    artifact = only_match("artifact", text, artifacts.items)
    version = only_match("artifact version", text, versions.items)
    if artifact is not None and version is not None:
        raise AmbiguousIdError(
            f"'{text}' is the start of the id of artifact '{artifact.name}' and of version "
            f"{version.version} of artifact '{version.name}'; give more digits."
        )
    if artifact is not None:
        return _version_of(client, artifact.name, number)
    if version is not None and number is not None and number != version.version:
        raise InputError(
            f"'{text}' is version {version.version} of artifact '{version.name}', not version "
            f"{number}; leave out --version, or name the artifact instead."
        )
    return version
