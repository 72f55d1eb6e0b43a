"""What a step's code references from its own module: the cache key's view of them.

Owns :func:`module_references`: the names the step function's code (and its nested code:
inner functions, lambdas, comprehensions) loads as globals, and those its definitions read where
they run (:func:`read_where_defined`: decorators' expressions, defaults, class bodies), resolved
in the step's own module, followed transitively. A function or class defined in that module
counts by its source without comments (``core.cache_key.without_comments``; its bytecode where
the source is unknown), then its own references (a class's through its body, its methods, its
nested classes and its bases of the module; a decorator read by a decorator line counts as a
function reached; the values a function reached closes over, ``helper = make_scaler(K)``'s
``K``, count as module-level values do); a module-level value of plain data (None, bool,
int, float, str, bytes and tuples, lists, dicts, sets and frozensets of them) by its canonical
encoding, a large one by that encoding's digest; any other object (a numpy array, a
dataclass instance, a compiled pattern) by its content as ``execution.held_values`` reads it,
a class of the module it holds by its qualified name and code. A value too large to hash
(:data:`MAX_HASHED_ITEMS`, :data:`MAX_HASHED_CHARS`), nested too deep or that cannot be
pickled (a lock, a connection, an open file) is *unhashed* (:func:`unhashed_references`): its
step is not cached (``sdk.compiler``), never keyed by the value's type alone. Not followed:
builtins, modules, code of other modules (functions, classes, what wraps a function: a step,
a ``CachePolicy``'s ``source_dependencies``), loggers and ``typing``'s constructs, which are
no data (:func:`_not_data`). Facts never hold the module's name: a script is ``__main__``
where it runs and ``__wharf_script__`` where an orchestrator loads it, and both must give one
key.
"""

from __future__ import annotations

import ast
import dis
import hashlib
import inspect
import logging
from collections.abc import Iterable, Iterator
from types import CodeType, FunctionType, GenericAlias, UnionType
from typing import Any

from wharf.core.cache_key import canonical, without_comments
from wharf.execution.held_values import (
    UnhashedValueError,
    held_value_digest,
    loaded_code_digest,
)

MAX_VALUE_CHARS = 100_000
"""Characters of its canonical encoding a module-level value may have to be held whole in the
key's facts; a longer one counts by the encoding's SHA-256."""
MAX_HASHED_ITEMS = 2_000_000
"""Elements (nested ones included) a module-level value may have to be hashed at all."""
MAX_HASHED_CHARS = 64_000_000
"""Characters (of its str and bytes, together) a module-level value may have to be hashed."""
UNHASHED = "unhashed:"
"""How the fact of a value the key cannot read starts (then its type and why)."""
CAPTURES = "<captures>"
"""What names a value a function reached closes over: ``LABEL<captures>QUALNAME:VARIABLE``."""

_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def module_references(func: Any) -> list[tuple[str, str]]:
    """(name, what the key holds of it) for each object of the step's module that ``func``
    (a step, or the function behind it) reaches, sorted by name."""
    target = _unwrapped(func)
    if not isinstance(target, FunctionType):
        return []
    gatherer = _Gatherer(target.__globals__, target.__module__)
    gatherer.seen_ids.add(id(target))
    gatherer.follow_code(target.__code__)
    gatherer.follow_closure(target)  # what else it closes over: in its code hash (sdk.step)
    gatherer.follow_definition(target)
    return sorted(gatherer.facts.items())


class _Gatherer:
    def __init__(self, module_globals: dict[str, Any], module_name: str) -> None:
        self.globals = module_globals
        self.module = module_name
        self.facts: dict[str, str] = {}
        self.seen_ids: set[int] = set()
        self.named: set[int] = set()

    def follow_code(self, code: CodeType) -> None:
        self.follow_names(global_loads(code))

    def follow_names(self, names: Iterable[str]) -> None:
        for name in sorted(names):
            if name in self.facts or name not in self.globals:
                continue  # seen already, or a builtin (or never defined)
            self.follow_name(name, self.globals[name])

    def follow_definition(self, obj: Any) -> None:
        """The names a function's or class's definition reads where it runs, which its code
        does not hold (:func:`read_where_defined`)."""
        self.follow_names(read_where_defined(obj))

    def follow_name(self, name: str, value: Any) -> None:
        own = [v for v in _behind(value) if self._own(v)]
        if own:
            self.facts[name] = "\n".join(_source_fact(v) for v in own)
            self.named.update(id(v) for v in own)
            for obj in own:
                self.follow_object(obj, name)
        else:
            fact = _data_fact(value, self.module)
            if fact is not None:
                self.facts[name] = fact

    def follow_object(self, obj: Any, label: str) -> None:
        """Follow a function or class of the module, reached as ``label`` (the name of its
        fact, or of the fact it is part of)."""
        if id(obj) in self.seen_ids:
            return
        self.seen_ids.add(id(obj))
        self.follow_definition(obj)
        if isinstance(obj, FunctionType):
            self.follow_code(obj.__code__)
            self.follow_closure(obj, label)
            return
        for base in obj.__bases__:  # a class
            if self._own(base):
                self.follow_name(f"{obj.__qualname__}<base>{base.__qualname__}", base)
        for attribute, member in vars(obj).items():
            for part in _members(member):
                if self._own(part):  # a method, or a nested class, of the module
                    self.follow_object(part, f"{label}.{attribute}")

    def follow_closure(self, func: FunctionType, label: str | None = None) -> None:
        """What a function reached as ``label`` closes over (a helper made by a factory,
        ``helper = make_scaler(K)``; a decorator's wrapper): the module's functions and classes
        followed (a helper decorated without ``functools.wraps``), any other value by content
        as a module-level value counts (:func:`_data_fact`), under ``LABEL<captures>QUALNAME:
        VARIABLE``. With no label (the step's own function, whose code hash holds what it closes
        over: ``sdk.step``), functions and classes only."""
        cells = zip(func.__code__.co_freevars, func.__closure__ or (), strict=False)
        for variable, cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # not bound yet
                continue
            own = [obj for obj in _behind(value) if self._own(obj)]
            for obj in own:
                if id(obj) in self.seen_ids:
                    continue
                reached_as = label
                if id(obj) not in self.named:
                    self.named.add(id(obj))
                    reached_as = self._put(f"<closed over>{obj.__qualname__}", _source_fact(obj))
                self.follow_object(obj, reached_as or f"<closed over>{obj.__qualname__}")
            if not own and label is not None:
                fact = _data_fact(value, self.module)
                if fact is not None:
                    owner = func.__code__.co_qualname  # a wrapper's own (functools.wraps)
                    self._put(f"{label}{CAPTURES}{owner}:{variable}", fact)

    def _put(self, name: str, fact: str) -> str:
        """Add a fact under ``name``, or ``name#2``, ``name#3``... if taken (two functions of
        one qualified name: a factory's, or one decorator applied twice); its name."""
        unique, count = name, 1
        while unique in self.facts:
            count += 1
            unique = f"{name}#{count}"
        self.facts[unique] = fact
        return unique

    def _own(self, obj: Any) -> bool:
        if isinstance(obj, FunctionType):
            return obj.__globals__ is self.globals
        return inspect.isclass(obj) and obj.__module__ == self.module


def unhashed_references(references: Iterable[tuple[str, str]]) -> list[str]:
    """What of ``references`` (:func:`module_references`) the key cannot read, each as
    ``module-level 'NAME', a type (why)``: a step reaching one must not be cached."""
    found = []
    for name, fact in references:
        if fact.startswith(UNHASHED):
            kind, _, why = fact.removeprefix(UNHASHED).partition(":")
            label, captures, captured = name.partition(CAPTURES)
            if captures:  # LABEL<captures>QUALNAME:VARIABLE[#N]
                owner, _, variable = captured.rpartition(":")
                variable = variable.partition("#")[0]
                where = f"'{variable}' captured by {owner} (module-level '{label}')"
            else:
                where = f"module-level '{name}'"
            found.append(f"{where}, a {kind} ({why})")
    return found


def global_loads(code: CodeType) -> set[str]:
    """The names ``code`` and its nested code load as globals (a class body's names too); a
    name a function binds locally is never one of them."""
    names: set[str] = set()
    for instruction in dis.get_instructions(code):
        if instruction.opname in _LOADS and isinstance(instruction.argval, str):
            names.add(instruction.argval)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= global_loads(const)
    return names


def read_where_defined(obj: Any) -> set[str]:
    """The names a ``def`` or ``class`` statement of ``obj`` (from its source) reads as it runs,
    which no code object keeps: its decorators' expressions (``@retry(times=TIMES)``), its
    defaults (``k=K``), a class's keywords and its body's statements (``layers = LAYERS``;
    its bases count as bases), then the same of the methods and classes in it, never their
    bodies (their code counts on its own). Annotations are left out; empty where the source is
    unknown."""
    try:
        source = inspect.getsource(obj.__code__ if isinstance(obj, FunctionType) else obj)
        if source[:1].isspace():  # a method's, indented (a string's lines may not be)
            block = ast.parse("if True:\n" + source).body[0]
            statements = block.body if isinstance(block, ast.If) else []
        else:
            statements = ast.parse(source).body
    except (OSError, TypeError, SyntaxError, ValueError):
        return set()
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if not statements or not isinstance(statements[0], definitions):
        return set()  # a lambda: no decorators, its code counts on its own
    name = obj.__code__.co_name if isinstance(obj, FunctionType) else obj.__name__
    if statements[0].name != name:  # (a wrapper is renamed by functools.wraps, not its code)
        return set()
    reader = _DefinitionReads()
    reader.visit(statements[0])
    return reader.names


class _DefinitionReads(ast.NodeVisitor):
    """Collects the names loaded where a definition runs (:func:`read_where_defined`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.add(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all([*node.decorator_list, *node.args.defaults, *node.args.kw_defaults])

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        keywords = [k.value for k in node.keywords]
        self._visit_all([*node.decorator_list, *keywords, *node.body])  # bases: <base>

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._visit_all([node.value])  # its annotation left out

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all([*node.args.defaults, *node.args.kw_defaults])
        inner = _DefinitionReads()
        inner.visit(node.body)
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
        self.names |= inner.names - {a.arg for a in arguments}

    def _visit_all(self, nodes: Iterable[ast.AST | None]) -> None:
        for node in nodes:
            if node is not None:
                self.visit(node)


def _unwrapped(value: Any) -> Any:
    try:
        return inspect.unwrap(value)
    except ValueError:  # a cycle of __wrapped__
        return value


def _behind(value: Any) -> Iterator[Any]:
    """``value`` and what it wraps: a step's function, a decorated function's (``__wrapped__``
    chain)."""
    seen: set[int] = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        if isinstance(value, FunctionType) or inspect.isclass(value):
            yield value
        value = getattr(value, "__wrapped__", None) if not inspect.isclass(value) else None


def _members(member: Any) -> list[Any]:
    """The functions (or class) behind a class attribute."""
    if isinstance(member, property):
        return [p for p in (member.fget, member.fset, member.fdel) if p is not None]
    member = getattr(member, "__func__", member)  # a staticmethod's, a classmethod's
    return list(_behind(member))


def _source_fact(obj: Any) -> str:
    """A function's own source (a wrapper's, not the function it wraps, which counts on its
    own) or a class's, without comments; its code's digest where its source is unknown."""
    try:
        code = obj.__code__ if isinstance(obj, FunctionType) else obj
        return "source:" + without_comments(inspect.getsource(code))
    except (OSError, TypeError):
        pass
    try:
        return "code:" + loaded_code_digest(obj)
    except UnhashedValueError as exc:
        return f"{UNHASHED}{type(obj).__name__}:{exc}"


def _plain_items(value: Any, budget: list[int]) -> bool | None:
    """True if plain data within the budget (``[elements, characters]`` left); False if over
    it (whatever it holds: not looked at further); None if not plain data."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    if value is None or isinstance(value, bool | int | float):
        return True
    if isinstance(value, str | bytes):
        budget[1] -= len(value)
        return budget[1] >= 0
    if isinstance(value, dict):
        parts: Iterable[Any] = (p for item in value.items() for p in item)
    elif isinstance(value, list | tuple | set | frozenset):
        parts = value
    else:
        return None
    for part in parts:
        inner = _plain_items(part, budget)
        if inner is not True:
            return inner
    return True


def _data_fact(value: Any, module: str) -> str | None:
    """A value's fact by :func:`_value_fact`, unhashed if nested too deep to encode."""
    try:
        return _value_fact(value, module)
    except RecursionError:
        return f"{UNHASHED}{type(value).__name__}:nested too deep"


def _value_fact(value: Any, module: str) -> str | None:
    """A plain value's canonical encoding (its SHA-256 if long; unhashed if too large to
    hash); another object's held-value digest (unhashed if it cannot be read); None for what
    is no data (:func:`_not_data`)."""
    plain = _plain_items(value, [MAX_HASHED_ITEMS, MAX_HASHED_CHARS])
    kind = type(value).__name__
    if plain is None:
        if _not_data(value):
            return None
        try:
            return f"held:{kind}:{held_value_digest(value, module)}"
        except UnhashedValueError as exc:
            return f"{UNHASHED}{kind}:{exc}"
    if not plain:
        return (
            f"{UNHASHED}{kind}:over {MAX_HASHED_ITEMS:,} elements or {MAX_HASHED_CHARS:,} "
            "characters, too large to hash"
        )
    encoded = canonical(value)
    if len(encoded) <= MAX_VALUE_CHARS:
        return f"value:{kind}:{encoded}"
    return f"sha256:{kind}:{hashlib.sha256(encoded.encode()).hexdigest()}"


def _not_data(value: Any) -> bool:
    """Whether a module-level object is no data the step computes from, left out of the key:
    a module, a function, class or other routine (code: the module's own count as code, other
    modules' are not in the key), an object wrapping a function (a step, a decorated function,
    of another module), a logger, a construct of ``typing`` (a ``TypeVar``, ``Optional[int]``,
    ``list[float]``)."""
    if inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value):
        return True
    if callable(value) and _unwrapped(value) is not value:
        return True
    if isinstance(value, logging.Logger | logging.LoggerAdapter):
        return True
    typing_kind = type(value).__module__ in ("typing", "typing_extensions")
    return typing_kind or isinstance(value, GenericAlias | UnionType)
