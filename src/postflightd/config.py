"""Configuration: TOML, every key optional, unknown keys are errors.

Lookup order for one root: ``--config PATH``, ``$POSTFLIGHTD_CONFIG``, ``ROOT/.postflightd.toml``,
the user config directory (platformdirs), else built-in defaults. Each root is governed by its
own lookup: a project's file never configures another root.

A project's own file is in the tree agents write, so it may set only what concerns that
project's files (``USER_ONLY_KEYS`` are refused there): what acts beyond the project (the
journal every project shares, the process's log, which roots are watched and how) comes from
the user's configuration (``--config``, ``$POSTFLIGHTD_CONFIG``, the user file, the defaults).

The configuration is plain data: frozen dataclasses, one per table, each field the one
definition of a key (name, type, default, bounds). Without a file nothing is validated; a
file's tables are validated by pydantic (the same dataclasses), imported only to read one.
A file of tables and booleans alone, as ``init`` writes it, needs no validator: it is read
as it is (``_plain_tables``), at every stop.

Why this module stays whole at a little over 500 lines: each key is declared once here, with
its type, default and bounds, and both readers of a file (as it is, and pydantic's) read
those declarations; split, a key's definition and the code that reads it would part.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal

import platformdirs

from postflightd.errors import ConfigError
from postflightd.fs.directory import Directory
from postflightd.inert import clip, inert

if TYPE_CHECKING:
    import tomllib

    from postflightd.rules.findings import Policy, Severity

APP_NAME = "postflightd"
ENV_CONFIG = "POSTFLIGHTD_CONFIG"
#: The dashboard's token (``serve``): from the environment or a file, never the command line.
ENV_TOKEN = "POSTFLIGHTD_TOKEN"  # noqa: S105 - the variable's name, not a token
ROOT_CONFIG_NAME = ".postflightd.toml"
#: A project's own configuration is read bounded: it is in the tree agents write.
MAX_CONFIG_BYTES = 1024 * 1024
#: Keys a project's own ``.postflightd.toml`` may not set: they act beyond the project (the
#: journal is every project's, the log and the observer are the daemon's, ``roots`` names other
#: projects, the periodic rescan is one timer for every root; a project may not vouch for
#: itself in ``trusted_roots``). A table name stands for all its keys.
USER_ONLY_KEYS = (
    "journal",
    "log",
    "watch.roots",
    "watch.observer",
    "watch.rescan_interval_s",
    "postflight.trusted_roots",
)
#: How much of a bad value a message quotes, and how many refused keys it names.
QUOTE_CHARS = 80
MAX_KEYS_NAMED = 5

#: What makes a .gitignore line more than a path: a pattern or escape character anywhere,
#: whitespace at either end of the value or of one of its components. A pattern, compiled (and
#: cached by ``re``) when a file's ``specs_dir`` is checked: the built-in one never is.
_GITIGNORE_SPECIAL = r"[*?\[\]!#\\]|^\s|\s$|\s/|/\s"


# Every number is bounded: the configuration may be the project's own, which agents can write,
# and a value past these (1e15 seconds, 1e12 days) overflows the date arithmetic of the
# healer and the pruner or turns a wait into forever. Infinity and NaN are refused too.
DAY_S: Final = 86_400.0
#: a run's timeout: 30 days
MAX_TIMEOUT_S: Final = 30 * DAY_S
#: journal retention: a century
MAX_KEEP_DAYS: Final = 36_500
#: the journal's budget for applied files' content: a terabyte
MAX_CONTENT_MB_LIMIT: Final = 1_000_000
#: the largest metadata file anyone may allow: 64 MiB
MAX_FILE_BYTES_LIMIT: Final = 64 * 1024 * 1024
#: how long a file that does not parse is waited on: a minute
MAX_SETTLE_MS: Final = 60_000
#: a status word of ``[postflight.status_map]``
MAX_STATUS_CHARS: Final = 64


# What pydantic reads when it validates a file's tables (``_adapter``): the bounds as
# ``Annotated`` metadata, the checks as ``_Check``, and this on every section. forbid: a typo in
# a key must be an error, not silently ignored. strict: a TOML string is never read as a number
# or a boolean. Infinity and NaN are refused (see the bounds above).
_PYDANTIC_CONFIG: Final = {"extra": "forbid", "strict": True, "allow_inf_nan": False}


class _Check:
    """``Annotated`` metadata: ``check`` run by pydantic on a file's value after the type's
    own validation (``before``: on the raw value, before it). Raising ValueError refuses it."""

    __slots__ = ("before", "check")

    def __init__(self, check: Callable[[Any], Any], *, before: bool = False) -> None:
        self.check = check
        self.before = before

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        if self.before:
            return core_schema.no_info_before_validator_function(self.check, handler(source))
        return core_schema.no_info_after_validator_function(self.check, handler(source))


class _Bounds:
    """``Annotated`` metadata: the bounds of a number (``gt``, ``ge``, ``le``), checked by
    pydantic on a file's value as it checks its own."""

    __slots__ = ("bounds",)

    def __init__(self, **bounds: float) -> None:
        self.bounds = bounds

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.bounds)  # pydantic's int and float schemas take them as they are
        return schema


class _Section:
    """A table of the configuration (each a frozen dataclass), as pydantic validates a file's.

    Each table has a docstring: without one, ``dataclass`` computes the class's signature to
    make one, at every start-up (a tenth of the class's cost)."""

    __slots__ = ()
    __pydantic_config__: ClassVar[dict[str, Any]] = _PYDANTIC_CONFIG

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        schema = handler(source)
        # A table arrives as a dict: strict on the section itself would want an instance.
        schema["strict"] = False
        for entry in schema["schema"]["fields"]:
            if entry["name"] in _NOT_KEYS:
                entry["init"] = False  # filled in by the loader, never read from a file
        return schema


# The rules' registry (rules.findings) is imported by the functions that read it, never at
# the top: a stop with no metadata file reads no file's tables and makes no policy, and the
# registry's records are a twentieth of such a stop.


def _codes(value: list[str]) -> list[str]:
    from postflightd.rules.findings import UnknownCodeError, expand_codes

    try:
        return sorted(expand_codes(value))
    except UnknownCodeError as exc:
        raise ValueError(str(exc)) from exc


def _severity_codes(value: Any) -> Any:
    from postflightd.rules.findings import Severity

    if isinstance(value, dict):
        _codes(list(value))
        return {
            str(k).upper(): Severity(v) if v in ("error", "warning") else v
            for k, v in value.items()
        }
    return value


def _status_word(value: str) -> str:
    # Written into state.json and shown in every report: a word, not a document.
    if not value.strip() or len(value) > MAX_STATUS_CHARS or inert(value) != value:
        raise ValueError(
            f"must be a status word of at most {MAX_STATUS_CHARS} characters, without "
            "control characters, e.g. 'completed'"
        )
    return value


def _plain_name(value: str) -> str:
    # These are written: a path would let a project's own configuration (which agents
    # can write) send the writes out of the specs directory.
    if not value.strip() or value in {".", ".."} or "/" in value or inert(value) != value:
        raise ValueError(
            "must be a plain file name inside the specs directory (no '/', not '..', no "
            "control characters), e.g. 'state.json'"
        )
    return value


def _absolute_paths(values: object) -> tuple[str, ...]:
    """A TOML list of absolute paths, as the tuple the table holds (tables are hashed)."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError("must be a list of absolute paths, e.g. ['/srv/team/project']")
    for value in values:
        if "\0" in value or not Path(value).is_absolute() or inert(value) != value:
            raise ValueError(f"{clip(value)!r} must be an absolute path, e.g. '/srv/team/project'")
    return tuple(values)


def _relative(value: str) -> str:
    parts = Path(value).parts
    if (
        not value.strip()
        or "\0" in value
        or Path(value).is_absolute()
        or ".." in parts
        or not parts
    ):
        raise ValueError("must be a relative path inside the project root, e.g. 'specs'")
    # `init` writes .gitignore lines from it, and it is printed and logged: a line break
    # would add a line of the agent's choosing (`!.env`), a pattern character would
    # change what the line matches, and a control character would reach a terminal.
    if inert(value) != value or re.search(_GITIGNORE_SPECIAL, value):
        raise ValueError(
            "must be a plain relative path: no control characters, no space at either end "
            "of it or of a folder name, none of * ? [ ] ! # \\, e.g. 'specs'"
        )
    return value


LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]
Codes = Annotated[list[str], _Check(_codes)]
Timeout = Annotated[float, _Bounds(gt=0, le=MAX_TIMEOUT_S)]
StatusWord = Annotated[str, _Check(_status_word)]
PlainName = Annotated[str, _Check(_plain_name)]


@dataclass(frozen=True, slots=True)
class ValidationConfig(_Section):
    """``[validation]``: which findings count, and at which severity."""

    select: Codes = field(default_factory=list)
    ignore: Codes = field(default_factory=list)
    strict: bool = False
    max_file_bytes: Annotated[int, _Bounds(gt=0, le=MAX_FILE_BYTES_LIMIT)] = 1024 * 1024
    check_artifacts: bool = True
    severity: Annotated[dict[str, Severity], _Check(_severity_codes, before=True)] = field(
        default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class TimeoutsConfig(_Section):
    """``[timeouts]``: each operation's timeout, in seconds."""

    research: Timeout = 3600
    planning: Timeout = 1800
    implementation: Timeout = 7200
    simple: Timeout = 300
    default: Timeout = 3600


@dataclass(frozen=True, slots=True)
class WatchConfig(_Section):
    """``[watch]``: what the daemon watches, and how."""

    roots: list[str] = field(default_factory=list)
    observer: Literal["auto", "inotify", "polling"] = "auto"
    settle_ms: Annotated[int, _Bounds(ge=0, le=MAX_SETTLE_MS)] = 200
    #: at least a tenth of a second: a rescan reads every file, and a tiny interval would spin.
    rescan_interval_s: Annotated[float, _Bounds(ge=0.1, le=DAY_S)] = 30
    #: after a state.json write, outcomes applied this recently are re-applied if it lost them
    #: (a writer that ignores the lock wrote an older copy over it); 0 turns the healing off.
    heal_window_s: Annotated[float, _Bounds(ge=0, le=DAY_S)] = 600


@dataclass(frozen=True, slots=True)
class StatusMap(_Section):
    """``[postflight.status_map]``: the status word state.json gets for each outcome."""

    researched: StatusWord = "researched"
    planned: StatusWord = "planned"
    implemented: StatusWord = "completed"
    blocked: StatusWord = "blocked"


@dataclass(frozen=True, slots=True)
class PostflightConfig(_Section):
    """``[postflight]``: the project files postflight writes."""

    sync_todo: bool = True
    state_file: PlainName = "state.json"
    todo_file: PlainName = "TODO.md"
    errors_file: PlainName = "errors.json"
    status_map: StatusMap = field(default_factory=StatusMap)
    #: project roots owned by another user that this user's commands and hooks still write
    #: to (as git's ``safe.directory``); every other such project is left alone.
    trusted_roots: Annotated[tuple[str, ...], _Check(_absolute_paths, before=True)] = ()


@dataclass(frozen=True, slots=True)
class JournalConfig(_Section):
    """``[journal]``: where the journal is, and what it keeps."""

    path: str = ""
    #: rows older than this are pruned by the daemon (in the background).
    keep_days: Annotated[float, _Bounds(gt=0, le=MAX_KEEP_DAYS)] = 90
    #: applied files' content kept in the journal, at most (the oldest goes first).
    max_content_mb: Annotated[float, _Bounds(gt=0, le=MAX_CONTENT_MB_LIMIT)] = 200


@dataclass(frozen=True, slots=True)
class HookConfig(_Section):
    """``[hook]``: what the stop hook does with a valid file."""

    #: false: the stop hook validates and blocks the agent until its own file is right, but
    #: applies and deletes nothing (a workflow that reads the file in a later stage, then runs
    #: ``postflightd process``, keeps it).
    apply: bool = True


@dataclass(frozen=True, slots=True)
class LogConfig(_Section):
    """``[log]``: the daemon's log."""

    format: LogFormat = "auto"
    level: LogLevel = "info"


@dataclass(frozen=True, slots=True)
class Config(_Section):
    """The whole configuration, a table per field."""

    specs_dir: Annotated[str, _Check(_relative)] = "specs"
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    timeouts: TimeoutsConfig = field(default_factory=TimeoutsConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    postflight: PostflightConfig = field(default_factory=PostflightConfig)
    journal: JournalConfig = field(default_factory=JournalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    hook: HookConfig = field(default_factory=HookConfig)
    #: where the configuration came from ("" for built-in defaults); not a TOML key.
    source: str = ""
    #: the top-level keys the file in use sets (a specs_dir it names must exist); not a TOML
    #: key, and not part of what the configuration is.
    file_keys: frozenset[str] = field(default=frozenset(), compare=False)


#: Config's fields that no file sets.
_NOT_KEYS: Final = frozenset({"source", "file_keys"})
#: Each table's record by the name its field's annotation gives it (``_plain_tables``).
_SECTIONS: Final[dict[str, type[_Section]]] = {
    t.__name__: t
    for t in (
        ValidationConfig,
        TimeoutsConfig,
        WatchConfig,
        StatusMap,
        PostflightConfig,
        JournalConfig,
        HookConfig,
        LogConfig,
        Config,
    )
}


def user_config_path() -> Path:
    return platformdirs.user_config_path(APP_NAME) / "config.toml"


def load_config(explicit: str | None = None, roots: Sequence[Path] | None = None) -> Config:
    """The configuration governing one root (``roots``: that root alone), or with no root the
    user's own (``--config``, ``$POSTFLIGHTD_CONFIG``, the user file, the defaults), which is
    where process-wide settings (journal, log, watch roots, observer) are read.

    A bad file raises ConfigError naming the file and the key. When the root's own
    ``.postflightd.toml`` is the file in use, setting any of ``USER_ONLY_KEYS`` there is an
    error naming the key, and those settings come from the user's configuration instead.
    """
    if roots is not None and len(roots) > 1:
        raise ValueError("load_config reads one root's configuration: call it once per root")
    root = roots[0] if roots else None
    chosen = explicit or os.environ.get(ENV_CONFIG)
    if chosen:
        return _read_config(Path(chosen))
    if root is not None:
        candidate = root / ROOT_CONFIG_NAME
        if _is_file(candidate):
            project = _read_config(candidate, in_project=True)
            return _with_user_settings(project, _user_file_config())
    return _user_file_config()


def load_configs(explicit: str | None, roots: Iterable[Path]) -> dict[Path, Config]:
    """Each root's own configuration (``load_config`` once per root)."""
    return {root: load_config(explicit, [root]) for root in roots}


def _user_file_config() -> Config:
    user = user_config_path()
    return _read_config(user) if _is_file(user) else Config()


def _with_user_settings(config: Config, user: Config) -> Config:
    """``config`` with every ``USER_ONLY_KEYS`` setting taken from ``user``."""
    watch = replace(
        config.watch,
        roots=user.watch.roots,
        observer=user.watch.observer,
        rescan_interval_s=user.watch.rescan_interval_s,
    )
    postflight = replace(config.postflight, trusted_roots=user.postflight.trusted_roots)
    return replace(config, journal=user.journal, log=user.log, watch=watch, postflight=postflight)


def _refuse_user_only_keys(data: Mapping[str, Any], path: Path) -> None:
    found: list[str] = []
    for key in USER_ONLY_KEYS:
        table, _, name = key.partition(".")
        value = data.get(table)
        if not name:
            if isinstance(value, Mapping) and value:
                found.extend(f"{table}.{k}" for k in value)
            elif value is not None:
                found.append(table)
        elif isinstance(value, Mapping) and name in value:
            found.append(key)
    if found:
        keys = ", ".join(_quote(repr(k)) for k in found[:MAX_KEYS_NAMED])
        if len(found) > MAX_KEYS_NAMED:
            keys += f" and {len(found) - MAX_KEYS_NAMED} more"
        raise ConfigError(
            f"{path}: bad configuration: key {keys}: not allowed in a project's own "
            f"{ROOT_CONFIG_NAME} (anything in the project can rewrite it, and the setting acts "
            f"beyond the project); set it in {user_config_path()}, with --config or with "
            f"${ENV_CONFIG}"
        )


def _is_file(path: Path) -> bool:
    # pathlib's is_file() raises on EACCES (only ENOENT-like errors mean False).
    try:
        return path.is_file()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot check for a configuration file: {exc.strerror}"
        ) from None


def _read_config(path: Path, *, in_project: bool = False) -> Config:
    # Kept here, not at the top: a project without a file of its own (a pre-commit scan, a
    # stop) reads none, and tomllib is about a tenth of the hook's imports.
    import tomllib

    try:
        if in_project:
            # Read like every file of the project tree: not through a link, not from a FIFO.
            with Directory.anchor(path.parent) as root:
                raw, _ = root.read(path.name, MAX_CONFIG_BYTES)
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML{_toml_problem(exc)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid TOML: the file is not UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
    except ValueError as exc:
        # tomllib's own errors are TOMLDecodeError (above): this is a value Python refuses,
        # such as an integer of more digits than int() converts.
        raise ConfigError(
            f"{path}: bad configuration: a value Python cannot read ({_quote(str(exc))})"
        ) from None
    if in_project:
        _refuse_user_only_keys(data, path)
    return parse_config(data, str(path))


def _lower_first(text: str) -> str:
    """pydantic's and tomllib's sentences (``Input should be ...``) inside ours: lower case."""
    return text[:1].lower() + text[1:]


def _toml_problem(exc: tomllib.TOMLDecodeError) -> str:
    """tomllib's ``Expected ... (at line 1, column 12)`` as `` at 1:12: expected ...``, to follow
    "not valid TOML"."""
    text = str(exc)
    where = re.search(_TOML_AT, text)
    if where is None:
        return f": {_lower_first(text)}"
    what = _lower_first(text[: where.start()].rstrip())
    if where.group(1) is None:
        return f": {what} at the end of the file"
    return f" at {where.group(1)}:{where.group(2)}: {what}"


#: Where tomllib says its error is (compiled when a file is not valid TOML).
_TOML_AT = r"\((?:at line (\d+), column (\d+)|at end of document)\)$"


def _quote(text: str) -> str:
    return clip(text, QUOTE_CHARS)


@cache
def _adapter() -> Any:
    """pydantic's validator of a file's tables into ``Config``: built once, when a file with
    values of its own is read (pydantic is imported then, never for the defaults)."""
    from pydantic import TypeAdapter

    # The tables' annotations name Severity, not imported at the top (``_codes``): pydantic
    # resolves them in this frame too.
    from postflightd.rules.findings import Severity  # noqa: F401

    return TypeAdapter(Config)


def parse_config(data: Mapping[str, Any], source: str) -> Config:
    plain = _plain_tables(Config, data)
    if isinstance(plain, Config):
        return replace(plain, source=source, file_keys=frozenset(data))
    return _validated(data, source)


def _plain_tables(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """``data`` as a ``cls`` without pydantic, when it holds only tables of ``cls``'s own,
    booleans of its ``bool`` keys and keys' defaults, each already what pydantic would make of
    it: what ``init`` writes (every table with its keys commented out, an empty
    ``[validation.severity]``, ``[hook] apply = false``), read at every stop. None for
    anything else, which pydantic checks, and words when it is wrong."""
    annotations = {f.name: f.type for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        annotation = annotations.get(key) if key not in _NOT_KEYS else None
        table = _SECTIONS.get(annotation) if isinstance(annotation, str) else None
        if table is not None and isinstance(value, dict):
            values[key] = _plain_tables(table, value)
        elif (annotation == "bool" and type(value) is bool) or (  # strict: never 1 nor "true"
            annotation is not None and _is_default(cls, key, value)
        ):
            values[key] = value
        else:
            return None
        if values[key] is None:
            return None
    return cls(**values)


def _is_default(cls: type[Any], key: str, value: object) -> bool:
    """``value`` is ``key``'s default, of the default's very type (``1.0`` is not ``1``)."""
    spec = next(f for f in fields(cls) if f.name == key)
    default = spec.default if spec.default_factory is MISSING else spec.default_factory()
    return type(value) is type(default) and value == default


def _validated(data: Mapping[str, Any], source: str) -> Config:
    """``data`` validated by pydantic into ``Config``, or ConfigError saying each problem."""
    from pydantic import ValidationError

    try:
        config: Config = _adapter().validate_python(dict(data))
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "unexpected_keyword_argument":
                problems.append(f"unknown key {key!r}")
                continue
            msg = _lower_first(err["msg"].removeprefix("Value error, ").removeprefix("Input "))
            if err["type"] == "dataclass_type":  # a table given as a value: worded as always
                msg = f"should be a valid dictionary or instance of {err['ctx']['class_name']}"
            problems.append(f"key {key!r}: {msg} (got {_quote(repr(err.get('input')))})")
        raise ConfigError(f"{source}: bad configuration: " + "; ".join(problems)) from None
    return replace(config, source=source, file_keys=frozenset(data))


def policy_from(
    config: Config,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    strict: bool | None = None,
) -> Policy:
    """The policy of a run: ``--select`` and ``--strict`` override the configuration file's
    ``[validation]`` table, ``--ignore`` adds to its ``ignore`` list."""
    from postflightd.rules.findings import Policy, expand_codes

    v = config.validation
    chosen = expand_codes(select) or frozenset(v.select)
    return Policy(
        select=chosen,
        ignore=expand_codes(ignore) | frozenset(v.ignore),
        severity=dict(v.severity),
        strict=v.strict if strict is None else strict,
    )
