"""Configuration: lookup order, defaults, and bad files as exit 2 naming file and key."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError, asdict, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.documents import researched_doc
from helpers.project import project, write_meta
from postflightd import config as config_module
from postflightd.cli import main
from postflightd.config import (
    Config,
    load_config,
    parse_config,
    user_config_path,
)
from postflightd.errors import ConfigError
from postflightd.project.setup import config_template
from postflightd.rules.findings import Severity


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def four_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """One config file at each place of the lookup order, each with a different specs_dir."""
    root = tmp_path / "root"
    root.mkdir()
    files = {
        "explicit": _write(tmp_path / "explicit.toml", 'specs_dir = "from_explicit"\n'),
        "env": _write(tmp_path / "env.toml", 'specs_dir = "from_env"\n'),
        "root": _write(root / ".postflightd.toml", 'specs_dir = "from_root"\n'),
        "user": _write(user_config_path(), 'specs_dir = "from_user"\n'),
    }
    monkeypatch.setenv("POSTFLIGHTD_CONFIG", str(files["env"]))
    return files


def test_user_config_is_under_the_isolated_config_home(tmp_path: Path) -> None:
    assert user_config_path().parts[-2:] == ("postflightd", "config.toml")
    assert "config" in user_config_path().parts


def test_lookup_order_explicit_first(four_configs: dict[str, Path]) -> None:
    root = four_configs["root"].parent
    config = load_config(str(four_configs["explicit"]), [root])
    assert config.specs_dir == "from_explicit"
    assert config.source == str(four_configs["explicit"])


def test_lookup_order_env_second(four_configs: dict[str, Path]) -> None:
    root = four_configs["root"].parent
    assert load_config(None, [root]).specs_dir == "from_env"


def test_lookup_order_root_third(
    four_configs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POSTFLIGHTD_CONFIG")
    root = four_configs["root"].parent
    assert load_config(None, [root]).specs_dir == "from_root"


def test_lookup_order_user_fourth(
    four_configs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POSTFLIGHTD_CONFIG")
    four_configs["root"].unlink()
    root = four_configs["root"].parent
    assert load_config(None, [root]).specs_dir == "from_user"


def test_defaults_without_any_file(tmp_path: Path) -> None:
    config = load_config(None, [tmp_path])
    assert config == Config()
    assert config.source == ""
    assert config.validation.max_file_bytes == 1024 * 1024
    assert asdict(config.timeouts) == {
        "research": 3600,
        "planning": 1800,
        "implementation": 7200,
        "simple": 300,
        "default": 3600,
    }


def test_example_config_file_is_valid() -> None:
    """config.example.toml documents every key with its default: it loads to the defaults."""
    example = Path(__file__).parent.parent / "config.example.toml"
    config = load_config(str(example))
    assert replace(config, source="") == Config()


def test_full_config_is_read(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "c.toml",
        """
specs_dir = ".claude/specs"
[validation]
select = ["PF3"]
ignore = ["pf205, PF207"]
strict = true
max_file_bytes = 2048
check_artifacts = false
[validation.severity]
pf307 = "error"
[timeouts]
research = 60
""",
    )
    config = load_config(str(path))
    assert config.specs_dir == ".claude/specs"
    assert "PF302" in config.validation.select
    assert config.validation.ignore == ["PF205", "PF207"]
    assert config.validation.strict
    assert config.validation.max_file_bytes == 2048
    assert not config.validation.check_artifacts
    assert config.validation.severity == {"PF307": Severity.ERROR}
    assert config.timeouts.research == 60


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("specs_dir = [", ["not valid TOML"]),
        ("specs_dri = 'specs'\n", ["specs_dri", "unknown key"]),
        ("[validation]\nstrikt = true\n", ["validation.strikt", "unknown key"]),
        ("[validation]\nstrict = 'yes'\n", ["validation.strict"]),
        ("[validation]\nmax_file_bytes = '1MiB'\n", ["validation.max_file_bytes"]),
        ("[validation]\nmax_file_bytes = 0\n", ["validation.max_file_bytes"]),
        ("[validation]\nselect = ['PF999']\n", ["validation.select", "PF999"]),
        ("[validation]\nignore = ['XY1']\n", ["validation.ignore", "XY1"]),
        ("[validation.severity]\nPF307 = 'fatal'\n", ["validation.severity"]),
        ("[validation.severity]\nPF999 = 'error'\n", ["validation.severity", "PF999"]),
        ("[timeouts]\nresearch = -1\n", ["timeouts.research"]),
        ("[watch]\nobserver = 'kqueue'\n", ["watch.observer"]),
        ("specs_dir = '../elsewhere'\n", ["specs_dir"]),
        ("specs_dir = '/abs'\n", ["specs_dir"]),
    ],
)
def test_bad_config_is_exit_2_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, names: list[str]
) -> None:
    path = _write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert str(path) in str(raised.value)
    for name in names:
        assert name in str(raised.value)

    root = project(tmp_path / "root")
    code = main(["scan", "--config", str(path), str(root)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert str(path) in captured.err
    assert "Traceback" not in captured.err


def test_bad_config_found_through_the_environment_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "env.toml", "[validation]\nstrict = 1\n")
    monkeypatch.setenv("POSTFLIGHTD_CONFIG", str(path))
    assert main(["scan", str(project(tmp_path / "root"))]) == 2
    assert str(path) in capsys.readouterr().err


def test_missing_explicit_config_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["scan", "--config", str(missing), str(project(tmp_path))]) == 2
    assert f"{missing}: configuration file not found" in capsys.readouterr().err


def test_non_utf8_config_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"specs_dir = '\xe9'\n")
    assert main(["scan", "--config", str(path), str(project(tmp_path / "r"))]) == 2
    assert str(path) in capsys.readouterr().err


def test_root_config_applies_to_the_scan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ROOT/.postflightd.toml is found from the scanned root; its specs_dir is used."""
    root = tmp_path / "root"
    _write(root / ".postflightd.toml", 'specs_dir = ".claude/specs"\n[validation]\nstrict = true\n')
    doc = researched_doc()
    doc["extra"] = 1
    task = root / ".claude" / "specs" / "259_prove_completeness"
    task.mkdir(parents=True)
    (task / ".return-meta.json").write_text(json.dumps(doc), encoding="utf-8")
    (task / "reports").mkdir()
    # Artifact paths are relative to the root: this one is not where the doc says.
    code = main(["scan", "--format", "json", "--select", "PF205", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert [f["path"] for f in report["files"]] == [
        ".claude/specs/259_prove_completeness/.return-meta.json"
    ]
    assert [f["code"] for f in report["files"][0]["findings"]] == ["PF205"]
    assert code == 1  # strict from the root config: the warning fails


def test_flags_override_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path)
    _write(root / ".postflightd.toml", "[validation]\nselect = ['PF205']\n")
    doc = researched_doc()
    doc["extra"] = 1
    write_meta(root, "259_prove_completeness", doc)
    main(["scan", "--format", "json", "--select", "PF502", str(root)])
    report = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in report["files"][0]["findings"]] == ["PF502"]


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "postflightd", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


#: Each numeric key just past its bound, and infinity and NaN: the project's own configuration
#: is a file agents can write, and these values broke the healer's and the pruner's arithmetic.
OVER_BOUND = [
    ("timeouts", "research", "2592001"),
    ("timeouts", "planning", "1e15"),
    ("timeouts", "implementation", "inf"),
    ("timeouts", "simple", "nan"),
    ("timeouts", "default", "2592000.5"),
    ("watch", "settle_ms", "60001"),
    ("watch", "rescan_interval_s", "86401"),
    ("watch", "rescan_interval_s", "0.01"),
    ("watch", "rescan_interval_s", "inf"),
    ("watch", "heal_window_s", "1e15"),
    ("watch", "heal_window_s", "nan"),
    ("validation", "max_file_bytes", str(64 * 1024 * 1024 + 1)),
    ("journal", "keep_days", "1e12"),
    ("journal", "keep_days", "36501"),
    ("journal", "max_content_mb", "1000001"),
    ("journal", "max_content_mb", "inf"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("table", "key", "value"), OVER_BOUND)
def test_a_number_past_its_bound_in_the_projects_config_is_exit_2(
    tmp_path: Path, table: str, key: str, value: str
) -> None:
    """`scan` of a project whose own .postflightd.toml holds it: exit 2 naming the key."""
    # keep_days and max_content_mb are the user's (the journal is theirs): --config for those.
    root = project(tmp_path / "root", 1)
    text = f"[{table}]\n{key} = {value}\n"
    if table == "journal":
        out = _cli("scan", "--config", _write(tmp_path / "user.toml", text), root)
    else:
        (root / ".postflightd.toml").write_text(text, encoding="utf-8")
        out = _cli("scan", root)
    assert out.returncode == 2, out.stderr
    assert f"key '{table}.{key}'" in out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == ""


@pytest.mark.slow
def test_every_number_at_its_bound_is_allowed(tmp_path: Path) -> None:
    root = project(tmp_path / "root", 1)
    path = _write(
        tmp_path / "user.toml",
        "[timeouts]\nresearch = 2592000\n[watch]\nsettle_ms = 60000\nrescan_interval_s = 86400\n"
        "heal_window_s = 86400\n[validation]\nmax_file_bytes = 67108864\n"
        "[journal]\nkeep_days = 36500\nmax_content_mb = 1000000\n",
    )
    out = _cli("scan", "--config", path, root)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "specs_dir",
    [
        "specs\n!.env\nspecs",
        "specs\r!.env",
        "!specs",
        "specs/*",
        "spe?cs",
        "[s]pecs",
        "#specs",
        "specs\\x",
        " specs",
        "specs ",
        "a/ b",
        "sp\x1b]0;x\x07ecs",
        "sp\u2028ecs",
    ],
)
def test_a_specs_dir_that_is_not_a_plain_path_is_exit_2_and_init_writes_nothing(
    tmp_path: Path, specs_dir: str
) -> None:
    """init writes .gitignore lines from specs_dir: a line break in it added `!.env`."""
    root = tmp_path / "root"
    root.mkdir()
    (root / ".gitignore").write_text("node_modules/\n", encoding="utf-8")
    (root / ".postflightd.toml").write_text(
        f"specs_dir = {json.dumps(specs_dir)}\n", encoding="utf-8"
    )
    out = _cli("init", root, "--yes")
    assert out.returncode == 2, out.stderr
    assert "key 'specs_dir'" in out.stderr
    assert "Traceback" not in out.stderr
    assert (root / ".gitignore").read_text(encoding="utf-8") == "node_modules/\n"
    assert not (root / ".claude").exists()


def test_a_plain_nested_specs_dir_with_a_space_inside_is_allowed(tmp_path: Path) -> None:
    config = parse_config({"specs_dir": ".claude/my specs"}, "test")
    assert config.specs_dir == ".claude/my specs"


@pytest.mark.parametrize("key", ["source", "file_keys"])
def test_what_the_loader_fills_in_is_not_a_key(tmp_path: Path, key: str) -> None:
    """Where the configuration came from and which keys it set are the loader's to say."""
    path = _write(tmp_path / "c.toml", f'{key} = "elsewhere.toml"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert str(raised.value) == f"{path}: bad configuration: unknown key {key!r}"


def test_the_keys_a_file_sets_are_kept_and_the_defaults_set_none(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.toml", 'specs_dir = "specs"\n[hook]\napply = false\n')
    assert load_config(str(path)).file_keys == {"specs_dir", "hook"}
    assert Config().file_keys == frozenset()


def test_a_table_given_as_a_value_names_the_table(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.toml", "hook = 1\n[postflight]\nstatus_map = []\n")
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert str(raised.value) == (
        f"{path}: bad configuration: key 'postflight.status_map': should be a valid dictionary "
        "or instance of StatusMap (got []); key 'hook': should be a valid dictionary or instance "
        "of HookConfig (got 1)"
    )


# --- a file of tables and booleans, read without pydantic ---------------------------------

#: The tables of a file, nested as in TOML; each key's boolean, or a value of another type.
_TABLES = ("validation", "timeouts", "watch", "postflight", "journal", "log", "hook")
_BOOLS = {
    "validation": ("strict", "check_artifacts"),
    "postflight": ("sync_todo",),
    "hook": ("apply",),
}
#: Keys whose default a file may restate (and values of other types in their place).
_OTHERS = {
    "validation": ("select", "severity", "max_file_bytes"),
    "timeouts": ("research", "default"),
    "watch": ("settle_ms", "heal_window_s"),
    "journal": ("keep_days", "path"),
    "log": ("format",),
}
_OTHER_VALUES = st.sampled_from([1, 0, "true", None, 1.5, [], {}, "specs", 200, 200.0, 3600])


_DEFAULTS = st.sampled_from([[], {}, 200, 600.0, 600, 3600.0, 90.0, 1048576, "", "auto"])


@st.composite
def _tables(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for table in draw(st.lists(st.sampled_from(_TABLES), unique=True)):
        known = _BOOLS.get(table, ()) + _OTHERS.get(table, ()) + ("x",)
        keys = draw(st.lists(st.sampled_from(known), unique=True))
        data[table] = {k: draw(st.booleans() | _OTHER_VALUES | _DEFAULTS) for k in keys}
        if table == "postflight" and draw(st.booleans()):
            data[table]["status_map"] = draw(st.sampled_from([{}, {"planned": "planned"}]))
    if draw(st.booleans()):
        data[draw(st.sampled_from(["apply", "specs_dir", "source", "file_keys"]))] = True
    return data


def _read(reader: Any, data: dict[str, Any]) -> Config | str:
    try:
        config: Config = reader(data, "test.toml")
    except ConfigError as exc:
        return str(exc)
    assert config.file_keys == frozenset(data)
    return config


@settings(max_examples=300, deadline=None, database=None)
@given(_tables())
def test_a_file_of_tables_and_booleans_reads_as_pydantic_reads_it(data: dict[str, Any]) -> None:
    assert _read(parse_config, data) == _read(config_module._validated, data)


@pytest.mark.parametrize("apply", [True, False], ids=["apply", "validator"])
def test_the_file_init_writes_is_read_without_pydantic(tmp_path: Path, apply: bool) -> None:
    """The stop hook reads the project's file at every stop: the one init writes (tables
    with every key commented out, ``[hook] apply`` perhaps set) is read as it is."""
    root = project(tmp_path / "proj", 1, config=config_template(apply=apply))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from postflightd.config import load_config\n"
        "config = load_config(None, [Path(sys.argv[1])])\n"
        "print(config.hook.apply, config.source, 'pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [str(apply), str(root / ".postflightd.toml"), "False"]


def test_a_configuration_copies_pickles_and_stays_frozen(tmp_path: Path) -> None:
    """A configuration crosses to a forked worker and is shared by threads: it pickles, copies,
    and refuses assignment; the keys it came with are not part of what it is."""
    path = tmp_path / "c.toml"
    path.write_text('[postflight.status_map]\nimplemented = "done"\n', encoding="utf-8")
    config = load_config(str(path))
    assert config.postflight.status_map.implemented == "done"
    assert pickle.loads(pickle.dumps(config)) == config  # noqa: S301 - our own bytes
    assert copy.deepcopy(config) == config
    assert replace(config, file_keys=frozenset()) == config
    assert hash(config.postflight) == hash(copy.deepcopy(config.postflight))
    with pytest.raises(FrozenInstanceError):
        config.specs_dir = "other"  # type: ignore[misc]
