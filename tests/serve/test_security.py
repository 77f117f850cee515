"""The dashboard's safety through a real ``postflightd serve`` process: it runs nothing a
project holds, answers at the machine's own names and addresses, redirects only within itself,
and takes its token from a file or the environment, never the command line."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import researched_doc
from helpers.needs import require_extra, require_tool, unavailable
from helpers.project import project, write_meta
from helpers.serve_process import served

require_extra("web", "the dashboard runs on it")

from postflightd.cli import main  # noqa: E402
from postflightd.serve.security import (  # noqa: E402
    allowed_hosts,
    is_loopback,
    machine_names,
    names_local_address,
    same_origin_path,
)

TOKEN = "s3cret-token-for-tests"  # noqa: S105 - a test's token
BY_ENV = {"POSTFLIGHTD_TOKEN": TOKEN}

#: What a planted package does when anything imports it: leave a mark, then look like the
#: real command so that only the mark tells.
PLANTED = """\
import pathlib, sys
pathlib.Path({mark!r}).write_text("ran " + " ".join(sys.argv))
"""


def get(
    port: int, path: str, *, host: str | None = None, token: str | None = None
) -> http.client.HTTPResponse:
    """One GET with exactly these headers; the answer read whole."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host or f"127.0.0.1:{port}")
    if token:
        conn.putheader("Authorization", f"Bearer {token}")
    conn.endheaders()
    answer = conn.getresponse()
    answer.read()
    conn.close()
    return answer


def plant_package(where: Path, mark: Path) -> None:
    package = where / "postflightd"
    package.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "cli.py"):
        (package / name).write_text(PLANTED.format(mark=str(mark)))


def test_the_figures_run_nothing_an_agent_planted_in_the_project(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 2)
    write_meta(root, "1_task1", researched_doc("1_task1"))
    assert main(["process", str(root / "specs/1_task1/.return-meta.json")]) == 0
    mark = tmp_path / "planted-code-ran"
    # An agent writes the project: a package named like ours, where the dashboard is started.
    plant_package(root, mark)
    plant_package(root / "specs", mark)
    with served(root, cwd=root) as (_, port):
        answer = get(port, "/figures?range=all")
        assert answer.status == 200
        assert answer.getheader("content-security-policy", "").startswith("default-src 'none'")
    assert not mark.exists(), mark.read_text()


def test_the_figures_follow_a_relative_config_path(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 1)
    (tmp_path / "mine.toml").write_text("[journal]\nkeep_days = 30\n")
    with served(root, cwd=tmp_path, extra=("--config", "mine.toml")) as (_, port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/figures?range=all")
        page = conn.getresponse().read().decode()
        conn.close()
    assert "mine.toml" not in page and "could not be made" not in page, page
    assert "<html" in page


@pytest.mark.slow
def test_a_wildcard_address_answers_at_the_machines_names_and_addresses(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 1)
    wildcard = ("--host", "0.0.0.0")  # noqa: S104 - the case tested
    with served(root, extra=wildcard, token=TOKEN, env=BY_ENV) as (_, port):
        for host in ("127.0.0.1", "localhost", socket.gethostname(), "0.0.0.0"):  # noqa: S104
            answer = get(port, "/api/state", host=f"{host}:{port}", token=TOKEN)
            assert answer.status == 200, host
        # Still no other site's name, nor another port, nor no port; nor without the token.
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1"):
            assert get(port, "/api/state", host=host, token=TOKEN).status == 421, host
        assert get(port, "/api/state").status == 401
        # An address the request did not arrive at is not this connection's: 421.
        assert get(port, "/api/state", host=f"127.0.0.2:{port}", token=TOKEN).status == 421


#: Runs its arguments under another host name: sets it (in a UTS namespace of its own), execs.
AS_HOST = (
    "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])"
)


@pytest.mark.slow
def test_a_wildcard_address_answers_at_localhost_whatever_the_machines_name(
    tmp_path: Path,
) -> None:
    """``localhost`` reaches a wildcard address as 127.0.0.1 does, also on a machine whose
    fully qualified name is its own (not ``localhost``, as here): run under such a name."""
    unshare = require_tool("unshare", "it gives the server a host name of its own (util-linux)")
    namespace = [unshare, "-u"] if os.geteuid() == 0 else [unshare, "-r", "-u"]
    name = "pf-dashboard.test"
    probe = subprocess.run(
        [*namespace, sys.executable, "-c", AS_HOST, name, "hostname"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0 or probe.stdout.strip() != name:
        unavailable(f"cannot name a UTS namespace here: {probe.stderr.strip()}")
    root = project(tmp_path / "project", 1)
    wildcard = ("--host", "0.0.0.0")  # noqa: S104 - the case tested
    wrapper = (*namespace, sys.executable, "-c", AS_HOST, name)
    with served(root, extra=wildcard, token=TOKEN, env=BY_ENV, wrapper=wrapper) as (_, port):
        for host in ("localhost", "127.0.0.1", name, "[::1]"):
            assert get(port, "/api/state", host=f"{host}:{port}", token=TOKEN).status == 200, host
        for host in ("evil.example", "localhost.evil.example", f"localhost:{port + 1}"):
            assert get(port, "/api/state", host=host, token=TOKEN).status == 421, host


def test_two_host_headers_are_never_answered(tmp_path: Path) -> None:
    """A request naming two hosts (the dashboard's and another) is refused, whichever comes
    first: the check reads one of them, a proxy or a browser may read the other."""
    root = project(tmp_path / "project", 1)
    with served(root) as (_, port):
        good, evil = f"127.0.0.1:{port}", "evil.example"
        for hosts in ((good, evil), (evil, good), (good, good.upper() + "x")):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.putrequest("GET", "/api/state", skip_host=True)
            for host in hosts:
                conn.putheader("Host", host)
            conn.endheaders()
            answer = conn.getresponse()
            answer.read()
            conn.close()
            assert answer.status in (400, 421), hosts


@pytest.mark.slow
def test_after_sign_in_the_redirect_stays_on_this_server(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 1)
    with served(root, token=TOKEN, env=BY_ENV) as (_, port):
        for path, expected in (
            (f"//evil.example/?token={TOKEN}", "/evil.example/"),
            (f"/\\evil.example/?token={TOKEN}", "/evil.example/"),
            (f"///evil.example/?range=7d&token={TOKEN}", "/evil.example/?range=7d"),
            (f"/?token={TOKEN}&range=24h", "/?range=24h"),
        ):
            answer = get(port, path)
            assert answer.status == 303, path
            assert answer.getheader("location") == expected, path


def serve_once(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``postflightd serve`` that must stop at once (a usage problem)."""
    return subprocess.run(
        [sys.executable, "-m", "postflightd", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_token_on_the_command_line_is_refused_with_where_to_put_it(tmp_path: Path) -> None:
    root = project(tmp_path / "project", 1)
    done = serve_once(str(root), "--token", TOKEN)
    assert done.returncode == 2
    assert "--token-file" in done.stderr and "POSTFLIGHTD_TOKEN" in done.stderr
    assert TOKEN not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it"),
        ("", "the token is empty"),
        ("two words", "printable ASCII"),
        ("x" * 300, "printable ASCII"),
        (b"\xff\xfe", "cannot read it"),
    ],
)
def test_a_bad_token_file_is_one_clear_line(
    tmp_path: Path, content: str | bytes | None, problem: str
) -> None:
    root = project(tmp_path / "project", 1)
    path = tmp_path / "token"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    done = serve_once(str(root), "--token-file", str(path), "--port", "1")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert problem in line and "--token-file" in line


@pytest.mark.slow
@pytest.mark.parametrize("source", ["file", "environment"])
def test_on_loopback_a_token_given_is_asked_of_every_request(tmp_path: Path, source: str) -> None:
    root = project(tmp_path / "project", 1)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    extra = ("--token-file", str(token_file)) if source == "file" else ()
    env = BY_ENV if source == "environment" else {}
    with served(root, extra=extra, token=TOKEN, env=env) as (server, port):
        for path in ("/", "/api/state", "/metrics", "/figures?range=7d"):
            assert get(port, path).status == 401, path
            assert get(port, path, token=TOKEN).status == 200, path
        # The token is in no process's arguments.
        assert TOKEN not in Path(f"/proc/{server.pid}/cmdline").read_text()


# --- the rules as functions, on plain values ----------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),  # noqa: S104 - a value compared, nothing bound
        ("192.168.1.5", False),
        ("localhost.evil.example", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_on_loopback_the_loopback_names_are_allowed_and_no_other() -> None:
    hosts = allowed_hosts("127.0.0.1", 8427)
    assert hosts == {"127.0.0.1:8427", "localhost:8427", "[::1]:8427"}
    assert "127.0.0.1" not in hosts, "without its port only on port 80"
    assert allowed_hosts("localhost", 80) >= {"localhost", "localhost:80", "127.0.0.1"}


def test_an_ipv6_address_is_allowed_in_brackets() -> None:
    assert "[::1]:8427" in allowed_hosts("::1", 8427)
    assert "::1:8427" not in allowed_hosts("::1", 8427)


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])  # noqa: S104 - values compared
def test_a_wildcard_address_allows_the_loopback_names(wildcard: str) -> None:
    assert {"localhost:8427", "127.0.0.1:8427", "[::1]:8427"} <= allowed_hosts(wildcard, 8427)
    assert "localhost:8428" not in allowed_hosts(wildcard, 8427)
    assert not {"localhost:8427", "[::1]:8427"} & allowed_hosts("192.0.2.7", 8427) - {
        f"{name}:8427" for name in machine_names()
    }


def test_beyond_loopback_the_machines_own_names_are_allowed() -> None:
    hosts = allowed_hosts("192.0.2.7", 8427)
    assert "192.0.2.7:8427" in hosts
    for name in machine_names():
        assert f"{name}:8427" in hosts
        assert name == name.lower() and not name.endswith(".")


@pytest.mark.parametrize(
    ("host", "server", "local"),
    [
        ("10.1.2.3:8427", ("10.1.2.3", 8427), True),
        ("10.1.2.3:8428", ("10.1.2.3", 8427), False),
        ("10.1.2.4:8427", ("10.1.2.3", 8427), False),
        ("10.1.2.3", ("10.1.2.3", 80), True),
        ("[fe80::1]:8427", ("fe80::1", 8427), True),
        ("[fe80::1]", ("fe80::1", 80), True),
        # An IPv4 client of a dual-stack socket arrives at the mapped address.
        ("10.1.2.3:8427", ("::ffff:10.1.2.3", 8427), True),
        ("evil.example:8427", ("10.1.2.3", 8427), False),
        ("10.1.2.3:\uff18\uff14\uff12\uff17", ("10.1.2.3", 8427), False),  # fullwidth digits
        ("10.1.2.3:x", ("10.1.2.3", 8427), False),
        ("[fe80::1]junk", ("fe80::1", 80), False),
        ("10.1.2.3:8427", None, False),
        ("10.1.2.3:8427", ("10.1.2.3", None), False),
    ],
)
def test_names_local_address(host: str, server: tuple[str, int | None] | None, local: bool) -> None:
    assert names_local_address(host, server) is local


@pytest.mark.parametrize(
    ("path", "safe"),
    [
        ("/", "/"),
        ("/figures", "/figures"),
        ("//evil.example/", "/evil.example/"),
        ("/\\evil.example/", "/evil.example/"),
        ("/a b", "/a%20b"),
        ("/\r\nSet-Cookie: x", "/%0D%0ASet-Cookie:%20x"),
    ],
)
def test_a_redirect_stays_on_this_server(path: str, safe: str) -> None:
    assert same_origin_path(path) == safe
