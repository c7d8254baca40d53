"""Host-key and certificate checks never fail open, whenever a Ctrl-C lands.

libgit2 asks memsync's certificate callback (through cffi) whether to trust the server; cffi
turns an exception that escapes a callback into its `error` value, 0 by default, and 0 means
"accept". So a Ctrl-C that lands at the wrong line used to let memsync talk to a server in no
known_hosts (or with an untrusted TLS certificate) and exit 0.

The interrupt is made deterministic with a line tracer: once the callback is entered, the N-th
line of memsync's code that runs inside it calls the process's SIGINT handler (what a real
Ctrl-C does between two lines), for every N along the callback's path (at CI size: every line of
the callback itself and every 4th of what it calls). A real SIGINT sweep over a subprocess
completes the picture.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from memsync.git import hostkeys
from memsync.util import records
from tests.conftest import Cli, Result, write
from tests.helpers.figures import Figures, figures, size
from tests.helpers.servers import HttpGitServer, SshGitServer, install_reject_hook, make_bare_hub

__all__ = ["figures"]

pytestmark = [pytest.mark.attack, pytest.mark.stress, pytest.mark.server]

STRIDE = size(4, 1)

_WATCHED = str(Path(hostkeys.__file__).parent.parent)  # memsync's own code
_CALLBACK = hostkeys._certificate_check.__code__


class Interrupter:
    """sys.settrace hook: the `at`-th line run inside the certificate callback gets a Ctrl-C."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.lines = 0
        self.depth = 0  # > 0 while the callback is on the stack
        self.fired = False
        self.in_callback: list[bool] = []  # per line counted: whether it is the callback's own

    def __enter__(self) -> Interrupter:
        sys.settrace(self.trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if frame.f_code is _CALLBACK:
            self.depth += 1
            return self.local
        if self.depth and frame.f_code.co_filename.startswith(_WATCHED):
            return self.local
        return None

    def local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "return" and frame.f_code is _CALLBACK:
            self.depth -= 1
        elif event == "line" and self.depth and not self.fired:
            self.lines += 1
            self.in_callback.append(frame.f_code is _CALLBACK)
            if self.lines == self.at:
                self.fired = True
                handler = signal.getsignal(signal.SIGINT)
                if callable(handler):
                    handler(signal.SIGINT, frame)  # raises, as at a real Ctrl-C
                raise KeyboardInterrupt
        return self.local


def sweep(run: Callable[[], Result], figures: Figures, what: str) -> dict[int, int]:
    """Interrupt the callback at every line it runs; returns {exit code: how many times}."""
    # Warm caches so that every run takes one path: the cffi declarations are parsed on first use,
    # and a record class builds its first instances with a generic __init__ (util/records.py).
    for _ in range(records._COMPILE_AFTER + 1):
        run()
    with Interrupter(at=10**9) as probe:
        baseline = run()
    assert baseline.code == 4, baseline.err  # uninterrupted, the server is refused
    total = probe.lines
    assert total > 10, f"the tracer saw only {total} lines of the callback"
    # Every line of the callback itself; of what it calls, every STRIDE-th (all of them in
    # `make stress`), to keep the test to a few seconds.
    points = [at for at in range(1, total + 1) if probe.in_callback[at - 1] or (at - 1) % STRIDE == 0]
    outcomes: dict[int, int] = {}
    for at in points:
        with Interrupter(at) as interrupter:
            result = run()
        assert interrupter.fired, f"{what}: line {at} of {total} was not reached"
        assert result.code in (4, 130), f"{what}: Ctrl-C at line {at}/{total} gave exit {result.code}: {result.err}"
        assert "research" not in result.out
        outcomes[result.code] = outcomes.get(result.code, 0) + 1
    figures.add("handshake interrupt points", len(points))
    return outcomes


@pytest.fixture
def unknown_ssh_hub(ssh_server: SshGitServer, tmp_path: Path, cli: Cli,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An ssh:// hub holding memory `research`, reached with a key the server accepts but an
    empty known_hosts: the server is unverified."""
    bare = make_bare_hub(tmp_path / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", str(bare), cwd=root).code == 0
    write(root, "notes.md", "from the real hub\n")
    assert cli("push", cwd=root).code == 0
    known = tmp_path / "known_hosts"
    known.write_text("")
    monkeypatch.setenv("MEMSYNC_KNOWN_HOSTS", str(known))
    monkeypatch.setenv("MEMSYNC_SSH_KEY", str(ssh_server.client_key))
    monkeypatch.chdir(tmp_path)
    yield ssh_server.url(bare)


def test_ctrl_c_anywhere_in_the_ssh_host_key_check_never_accepts(unknown_ssh_hub: str, cli: Cli,
                                                                 figures: Figures) -> None:
    figures.add("security attacks")
    outcomes = sweep(lambda: cli("list", "--remote", unknown_ssh_hub), figures, "ssh")
    figures.add("security attacks refused")
    assert outcomes.get(130), outcomes  # the interrupt is reported as one, not swallowed
    print(f"ssh host-key check: interrupted at {sum(outcomes.values())} points, exit codes {outcomes}")


@pytest.fixture
def untrusted_https_hub(https_server: HttpGitServer, tmp_path: Path, cli: Cli,
                        monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpGitServer]:
    """An https:// hub holding `research` whose self-signed certificate is trusted by nothing."""
    bare = make_bare_hub(https_server.project_root / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", str(bare), cwd=root).code == 0
    write(root, "notes.md", "from the real hub\n")
    assert cli("push", cwd=root).code == 0
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMSYNC_TOKEN", https_server.token)
    monkeypatch.setenv("MEMSYNC_USER", https_server.user)
    monkeypatch.chdir(tmp_path)
    yield https_server


def test_ctrl_c_anywhere_in_the_tls_verdict_never_accepts(untrusted_https_hub: HttpGitServer, cli: Cli,
                                                          figures: Figures) -> None:
    url = untrusted_https_hub.url("hub.git")
    figures.add("security attacks")
    outcomes = sweep(lambda: cli("list", "--remote", url), figures, "tls")
    figures.add("security attacks refused")
    assert not any(r.header("Authorization") for r in untrusted_https_hub.requests)  # no token sent
    print(f"tls verdict: interrupted at {sum(outcomes.values())} points, exit codes {outcomes}")


def test_real_sigint_during_the_ssh_handshake(unknown_ssh_hub: str, tmp_path: Path, figures: Figures) -> None:
    """A real SIGINT to a `memsync list` subprocess at a range of delays, from the end of Python's
    start-up to past the end of an uninterrupted run: each ends refused (4) or interrupted (130),
    never exiting 0 nor listing the unverified hub's memories."""
    argv = [sys.executable, "-m", "memsync", "list", "--remote", unknown_ssh_hub]
    started = time.monotonic()
    assert subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=60).returncode == 4
    full = time.monotonic() - started
    steps = size(8, 64)
    figures.add("security attacks")
    outcomes: dict[int, int] = {}
    for step in range(steps):
        delay = 0.15 + (full * 1.1 - 0.15) * step / (steps - 1)
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        # -SIGINT: it landed while Python was exiting, after the refusal was printed.
        refused = proc.returncode in (4, 130) or (proc.returncode == -signal.SIGINT and "error: " in err)
        # On a loaded machine the earliest delays can land in Python's own start-up, before any of
        # memsync runs: the interpreter stops there (exit 1, "Fatal Python error"), listing nothing.
        before_memsync = proc.returncode == 1 and err.startswith("Fatal Python error: init_import_site")
        assert refused or before_memsync, f"SIGINT after {delay:.3f}s: exit {proc.returncode}: {err}"
        assert "research" not in out
        outcomes[proc.returncode] = outcomes.get(proc.returncode, 0) + 1
    figures.add("security attacks refused")
    figures.add("handshake interrupt points", steps)
    print(f"real SIGINT sweep over {full:.2f}s: {outcomes}")


class WrapperInterrupter:
    """sys.settrace hook: a Ctrl-C at the `at`-th line of pygit2's wrapper around one callback
    (lines 1-2 run before the wrapper's own try)."""

    def __init__(self, callback: str, at: int) -> None:
        self.callback = callback
        self.at = at
        self.lines = 0
        self.fired = False

    def __enter__(self) -> WrapperInterrupter:
        sys.settrace(self.trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        wrapped = frame.f_locals.get("f") if frame.f_code.co_name == "wrapper" else None
        if not self.fired and getattr(wrapped, "__name__", "") == self.callback:
            return self.local
        return None

    def local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line" and not self.fired:
            self.lines += 1
            if self.lines == self.at:
                self.fired = True
                handler = signal.getsignal(signal.SIGINT)
                if callable(handler):
                    handler(signal.SIGINT, frame)
                raise KeyboardInterrupt
        return self.local


def _pushed_over_daemon(git_daemon, cli: Cli, tmp_path: Path) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A memory `research` on a bare hub served by `git daemon`, with one file pushed: (hub, memory)."""
    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    root = tmp_path / "research"
    root.mkdir()
    assert cli("init", "--remote", git_daemon.url("hub.git"), cwd=root).code == 0
    write(root, "a.md", "a\n")
    assert cli("push", cwd=root).code == 0
    return bare, root


@pytest.mark.parametrize("at", [1, 2, 3])
def test_ctrl_c_in_the_push_verdict_never_reports_a_refused_push_as_pushed(git_daemon, cli: Cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                           at: int, figures: Figures) -> None:
    """The server's verdict on each pushed ref arrives through a callback too: a Ctrl-C before
    pygit2's try used to drop a refusal, and memsync said the push was done (exit 0)."""
    figures.add("security attacks")
    bare, root = _pushed_over_daemon(git_daemon, cli, tmp_path)
    install_reject_hook(bare, "protected")
    write(root, "b.md", "b\n")
    with WrapperInterrupter("_push_update_reference_cb", at) as interrupter:
        r = cli("push", cwd=root)
    assert interrupter.fired
    assert r.code in (5, 130), (r.code, r.out, r.err)
    figures.add("security attacks refused")


@pytest.mark.parametrize("at", [1, 2, 3])
def test_ctrl_c_in_the_push_lease_check_sends_nothing(git_daemon, cli: Cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                      at: int, figures: Figures) -> None:
    """A push ahead of the hub checks its lease (the hub's tip) in libgit2's push-negotiation
    callback: a Ctrl-C there must stop the push, never let it go on unchecked."""
    figures.add("security attacks")
    bare, root = _pushed_over_daemon(git_daemon, cli, tmp_path)
    before = subprocess.run(["git", "rev-parse", "memory/research"], cwd=bare, capture_output=True,
                            text=True, check=True).stdout
    write(root, "b.md", "b\n")
    with WrapperInterrupter("_push_negotiation_cb", at) as interrupter:
        r = cli("push", cwd=root)
    assert interrupter.fired
    assert r.code == 130, (r.code, r.out, r.err)
    after = subprocess.run(["git", "rev-parse", "memory/research"], cwd=bare, capture_output=True,
                           text=True, check=True).stdout
    assert after == before
    assert cli("push", cwd=root).code == 0  # the commit was kept: the next push delivers it
    figures.add("security attacks refused")


def test_a_ctrl_c_while_objects_arrive_aborts_the_fetch(tmp_path: Path, git_daemon) -> None:  # type: ignore[no-untyped-def]
    """libgit2 calls back into Python per object received: a Ctrl-C landing there (here in the
    progress shown, through pygit2's callback) still stops the fetch and is still a Ctrl-C.
    memsync's own callbacks when no progress is shown: tests/unit/git/test_interrupts.py."""
    import pygit2

    from memsync.git import hub as hubmod
    from memsync.git import transport
    from memsync.git.repo import GitRepo

    bare = make_bare_hub(git_daemon.base_path / "hub.git")
    src = pygit2.init_repository(str(tmp_path / "src"))
    for n in range(40):
        write(tmp_path / "src", f"f{n}.md", f"{n}\n")
    src.index.add_all()
    src.index.write()
    sig = pygit2.Signature("a", "a@example.com")
    src.create_commit("refs/heads/main", sig, sig, "files", src.index.write_tree(), [])
    subprocess.run(["git", "push", "-q", str(bare), "main:refs/heads/memory/research"], cwd=tmp_path / "src",
                   check=True)
    calls = []

    def ctrl_c_at_the_20th(phase: str, done: int, total: int, received: int) -> None:
        calls.append(1)
        if len(calls) == 20:
            raise KeyboardInterrupt

    dest = GitRepo.bare(tmp_path / "dest", create=True)
    hub = hubmod.resolve(git_daemon.url("hub.git"), None)
    with pytest.raises(KeyboardInterrupt):
        transport.fetch(dest, hub, ["+refs/heads/memory/research:refs/hub/research"], progress=ctrl_c_at_the_20th)
    assert len(calls) == 20
    assert "refs/hub/research" not in pygit2.Repository(str(tmp_path / "dest")).references
