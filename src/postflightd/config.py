"""Configuration: TOML, every key optional, unknown keys are errors.

Lookup order: ``--config PATH``, ``$POSTFLIGHTD_CONFIG``, ``ROOT/.postflightd.toml``, the user
config directory (platformdirs), else built-in defaults.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from postflightd.errors import ConfigError
from postflightd.fs.directory import Directory
from postflightd.rules.findings import Policy, Severity, UnknownCodeError, expand_codes

APP_NAME = "postflightd"
ENV_CONFIG = "POSTFLIGHTD_CONFIG"
ROOT_CONFIG_NAME = ".postflightd.toml"
#: A project's own configuration is read bounded: it is in the tree agents write.
MAX_CONFIG_BYTES = 1024 * 1024


class _Section(BaseModel):
    # forbid: a typo in a key must be an error, not silently ignored.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _codes(value: list[str]) -> list[str]:
    try:
        return sorted(expand_codes(value))
    except UnknownCodeError as exc:
        raise ValueError(str(exc)) from exc


class ValidationConfig(_Section):
    select: list[str] = Field(default_factory=list)
    ignore: list[str] = Field(default_factory=list)
    strict: bool = False
    max_file_bytes: int = Field(default=1024 * 1024, gt=0)
    check_artifacts: bool = True
    severity: dict[str, Severity] = Field(default_factory=dict)

    _check_select = field_validator("select", "ignore")(_codes)

    @field_validator("severity", mode="before")
    @classmethod
    def _severity_codes(cls, value: Any) -> Any:
        if isinstance(value, dict):
            _codes(list(value))
            return {
                str(k).upper(): Severity(v) if v in ("error", "warning") else v
                for k, v in value.items()
            }
        return value


class TimeoutsConfig(_Section):
    research: float = Field(default=3600, gt=0)
    planning: float = Field(default=1800, gt=0)
    implementation: float = Field(default=7200, gt=0)
    simple: float = Field(default=300, gt=0)
    default: float = Field(default=3600, gt=0)

    def as_mapping(self) -> dict[str, float]:
        return self.model_dump()


class WatchConfig(_Section):
    roots: list[str] = Field(default_factory=list)
    observer: Literal["auto", "inotify", "polling"] = "auto"
    settle_ms: int = Field(default=200, ge=0)
    rescan_interval_s: float = Field(default=30, gt=0)
    #: after a state.json write, outcomes applied this recently are re-applied if it lost them
    #: (a writer that ignores the lock wrote an older copy over it); 0 turns the healing off.
    heal_window_s: float = Field(default=600, ge=0)


class StatusMap(_Section):
    researched: str = "researched"
    planned: str = "planned"
    implemented: str = "completed"
    blocked: str = "blocked"


class PostflightConfig(_Section):
    sync_todo: bool = True
    state_file: str = "state.json"
    todo_file: str = "TODO.md"
    errors_file: str = "errors.json"
    status_map: StatusMap = Field(default_factory=StatusMap)

    @field_validator("state_file", "todo_file", "errors_file")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        # These are written: a path would let a project's own configuration (which agents
        # can write) send the writes out of the specs directory.
        if not value.strip() or value in {".", ".."} or "/" in value or "\0" in value:
            raise ValueError(
                "must be a plain file name inside the specs directory (no '/', not '..'), "
                "e.g. 'state.json'"
            )
        return value


class JournalConfig(_Section):
    path: str = ""
    #: rows older than this are pruned by the daemon (in the background).
    keep_days: float = Field(default=90, gt=0)
    #: applied files' content kept in the journal, at most (the oldest goes first).
    max_content_mb: float = Field(default=200, gt=0)


class LogConfig(_Section):
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class Config(_Section):
    specs_dir: str = "specs"
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    timeouts: TimeoutsConfig = Field(default_factory=TimeoutsConfig)
    watch: WatchConfig = Field(default_factory=WatchConfig)
    postflight: PostflightConfig = Field(default_factory=PostflightConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    #: where the configuration came from ("" for built-in defaults); not a TOML key.
    source: str = Field(default="", exclude=True)

    @field_validator("specs_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        parts = Path(value).parts
        if (
            not value.strip()
            or "\0" in value
            or Path(value).is_absolute()
            or ".." in parts
            or not parts
        ):
            raise ValueError("must be a relative path inside the project root, e.g. 'specs'")
        return value


def user_config_path() -> Path:
    from platformdirs import user_config_path as _ucp

    return _ucp(APP_NAME) / "config.toml"


def find_config_file(explicit: str | None, roots: list[Path]) -> Path | None:
    """The first configuration file of the lookup order (the module docstring), or None."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env)
    for root in roots:
        candidate = root / ROOT_CONFIG_NAME
        if _is_file(candidate):
            return candidate
    user = user_config_path()
    return user if _is_file(user) else None


def _is_file(path: Path) -> bool:
    # pathlib's is_file() raises on EACCES (only ENOENT-like errors mean False).
    try:
        return path.is_file()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot check for a configuration file: {exc.strerror}"
        ) from None


def load_config(explicit: str | None = None, roots: list[Path] | None = None) -> Config:
    """Load the configuration; a bad file raises ConfigError naming the file and the key.

    A project's own ``ROOT/.postflightd.toml`` may not set ``[journal] path`` (agents can
    write that file; the journal is the user's): it is an error naming the key, and the
    journal path then comes from the user configuration file, else the default.
    """
    path = find_config_file(explicit, roots or [])
    if path is None:
        return Config()
    chosen = explicit or os.environ.get(ENV_CONFIG)
    if not chosen and path.name == ROOT_CONFIG_NAME and path.parent in (roots or []):
        return _without_project_journal(_read_config(path, in_project=True), path)
    return _read_config(path)


def _without_project_journal(config: Config, path: Path) -> Config:
    if config.journal.path:
        raise ConfigError(
            f"{path}: bad configuration: key 'journal.path': not allowed in a project's own "
            f"{ROOT_CONFIG_NAME} (anything in the project can rewrite it); set it in "
            f"{user_config_path()}, with --config or with ${ENV_CONFIG}"
        )
    user = user_config_path()
    if _is_file(user):
        journal = _read_config(user).journal
        return config.model_copy(update={"journal": journal})
    return config


def _read_config(path: Path, *, in_project: bool = False) -> Config:
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
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid TOML: the file is not UTF-8") from None
    return parse_config(data, str(path))


def parse_config(data: Mapping[str, Any], source: str) -> Config:
    try:
        config = Config.model_validate(dict(data))
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key {key!r}")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                problems.append(f"key {key!r}: {msg} (got {err.get('input')!r})")
        raise ConfigError(f"{source}: bad configuration: " + "; ".join(problems)) from None
    return config.model_copy(update={"source": source})


def policy_from(
    config: Config,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    strict: bool | None = None,
) -> Policy:
    """The policy of a run: command flags (``--select``, ``--ignore``, ``--strict``) override
    the configuration file's ``[validation]`` table."""
    v = config.validation
    chosen = expand_codes(select) or frozenset(v.select)
    return Policy(
        select=chosen,
        ignore=expand_codes(ignore) | frozenset(v.ignore),
        severity=dict(v.severity),
        strict=v.strict if strict is None else strict,
    )
