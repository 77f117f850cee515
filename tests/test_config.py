"""Configuration (SPEC 4.1): lookup order, defaults, and bad files as exit 2 naming file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.project import project, write_meta
from postflightd.cli import main
from postflightd.config import (
    Config,
    find_config_file,
    load_config,
    user_config_path,
)
from postflightd.errors import ConfigError
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
    assert find_config_file(None, [root]) == four_configs["user"]
    assert load_config(None, [root]).specs_dir == "from_user"


def test_defaults_without_any_file(tmp_path: Path) -> None:
    assert find_config_file(None, [tmp_path]) is None
    config = load_config(None, [tmp_path])
    assert config == Config()
    assert config.source == ""
    assert config.validation.max_file_bytes == 1024 * 1024
    assert config.timeouts.as_mapping() == {
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
    assert config.model_dump() == Config().model_dump()


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
