"""tree: the one file layer; directories opened once without links, work relative to them."""

from __future__ import annotations

import gc
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.needs import require
from postflightd.fs.directory import Directory, RefusedError, open_specs


@pytest.fixture
def specs(tmp_path: Path) -> Iterator[Directory]:
    (tmp_path / "specs").mkdir()
    with Directory.anchor(tmp_path / "specs") as directory:
        yield directory


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "/etc/passwd", "x\0y"])
def test_only_plain_names_inside_the_directory(specs: Directory, name: str) -> None:
    """A name with a slash or a dot-dot would step out of the directory opened: refused."""
    for op in (
        lambda: specs.subdir(name),
        lambda: specs.open_regular(name),
        lambda: specs.lstat(name),
        lambda: specs.exists(name),
        lambda: specs.unlink(name),
        lambda: specs.rename(name, "x"),
        lambda: specs.rename("x", name),
        lambda: specs.create_new(name, 0o644),
    ):
        with pytest.raises(RefusedError, match="not a plain file name"):
            op()


def test_a_link_is_refused_for_a_directory_and_for_a_file(tmp_path: Path, specs: Directory) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s", encoding="utf-8")
    (specs.path / "task").symlink_to(outside, target_is_directory=True)
    (specs.path / "file").symlink_to(outside / "secret")
    with pytest.raises(RefusedError, match="symbolic link") as info:
        specs.subdir("task")
    assert info.value.kind == "a symbolic link"
    with pytest.raises(RefusedError, match="symbolic link"):
        specs.read("file")
    (specs.path / "plain").write_text("x", encoding="utf-8")
    with pytest.raises(RefusedError, match="not a directory"):
        specs.subdir("plain")


def test_fifo_socket_and_directory_are_not_regular_files(specs: Directory) -> None:
    """Each is refused at once: a FIFO is opened without waiting for a writer, never read."""
    os.mkfifo(specs.path / "fifo")
    (specs.path / "dir").mkdir()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(specs.path / "sock"))
        for name, kind in (("fifo", "a FIFO"), ("dir", "a directory"), ("sock", "a socket")):
            for flags in (os.O_RDONLY, os.O_RDWR | os.O_CREAT):
                with pytest.raises(RefusedError) as info:
                    specs.open_regular(name, flags)
                assert info.value.kind == kind, (name, flags)


def test_an_open_directory_is_the_directory_not_its_name(tmp_path: Path, specs: Directory) -> None:
    """A task directory swapped for a link after it was opened: reads stay in the one opened."""
    (specs.path / "1_x").mkdir()
    (specs.path / "1_x" / "f").write_text("inside", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("outside", encoding="utf-8")
    with specs.subdir("1_x") as task:
        (specs.path / "1_x").rename(specs.path / ".aside")
        (specs.path / "1_x").symlink_to(outside, target_is_directory=True)
        assert task.read("f")[0] == b"inside"
        task.unlink("f")
    assert (outside / "f").read_text(encoding="utf-8") == "outside"
    assert not (specs.path / ".aside" / "f").exists()


def test_subdir_with_an_expected_identity_refuses_a_replacement(specs: Directory) -> None:
    (specs.path / "1_x").mkdir()
    with specs.subdir("1_x") as first:
        seen = first.identity
    (specs.path / "1_x").rename(specs.path / "old")
    (specs.path / "1_x").mkdir()
    with pytest.raises(FileNotFoundError, match="replaced"):
        specs.subdir("1_x", expect=seen)
    (specs.path / "1_x").rmdir()
    (specs.path / "old").rename(specs.path / "1_x")
    with specs.subdir("1_x", expect=seen) as again:
        assert again.identity == seen


def test_read_is_bounded_and_skips_a_file_already_too_large(specs: Directory) -> None:
    with (specs.path / "big").open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    raw, st = specs.read("big", 1024)
    assert raw == b""
    assert st.st_size == 50 * 1024 * 1024
    (specs.path / "small").write_bytes(b"x" * 100)
    assert specs.read("small", 10)[0] == b""  # its size says "too large": nothing read
    assert specs.read("small", 100)[0] == b"x" * 100
    assert specs.read("small")[0] == b"x" * 100


def test_read_goes_on_past_the_size_fstat_gave(specs: Directory) -> None:
    """A small file is read in one read of its size and a byte more; a file holding more than
    its fstat said (one that grew meanwhile; /proc's files all say 0) is read on to its end,
    still bounded."""
    (specs.path / "empty").write_bytes(b"")
    assert specs.read("empty", 100)[0] == b""
    (specs.path / "five").write_bytes(b"y" * 5)
    assert specs.read("five", 5)[0] == b"y" * 5
    require(Path("/proc/self/status").exists(), "no /proc here")
    with Directory.anchor(Path("/proc/self")) as proc:
        raw, st = proc.read("status", 1 << 16)
        assert st.st_size == 0
        assert raw.startswith(b"Name:")
        assert raw.endswith(b"\n")
        assert len(proc.read("status", 10)[0]) == 11  # the bound: limit + 1


def test_a_file_larger_than_one_read_is_read_whole_and_bounded(specs: Directory) -> None:
    """Past the first read of a megabyte, the rest is read on, up to the limit and a byte."""
    data = bytes(range(256)) * (10 * 1024 + 3)  # 2.5 MiB and a little
    (specs.path / "large").write_bytes(data)
    assert specs.read("large")[0] == data
    assert specs.read("large", len(data))[0] == data
    assert specs.read("large", len(data) - 1)[0] == b""  # its size says "too large"


def test_exists_never_follows_a_link(tmp_path: Path, specs: Directory) -> None:
    """Anything of that name counts, a link as itself (even one that leads nowhere)."""
    (specs.path / "file").write_text("x")
    (specs.path / "dangling").symlink_to(tmp_path / "nowhere")
    (specs.path / "dir").mkdir()
    assert specs.exists("file")
    assert specs.exists("dangling")
    assert specs.exists("dir")
    assert not specs.exists("missing")


def test_open_specs_refuses_a_link_at_any_component(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere" / "specs"
    real.mkdir(parents=True)
    root = tmp_path / "root"
    (root / ".claude").mkdir(parents=True)
    (root / ".claude" / "specs").symlink_to(real, target_is_directory=True)
    (root / "alias").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    for specs_dir in (".claude/specs", "alias/specs"):
        with pytest.raises(RefusedError, match="symbolic link"):
            open_specs(root, specs_dir)
    (root / "specs").mkdir()
    with open_specs(root, "specs") as specs:
        assert specs.path == root / "specs"
    with pytest.raises(FileNotFoundError):
        open_specs(root, "missing")


def test_a_forgotten_directory_is_closed_when_collected(specs: Directory) -> None:
    fd = Directory.anchor(specs.path).fd  # the object is dropped at once
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)
    specs.close()
    specs.close()  # closing twice is harmless
