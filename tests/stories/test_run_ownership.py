"""A run owns its memory while it runs: operator verbs in the same directory refuse (exit 6) instead
of committing the run's files as the operator's, a second run waits its turn then refuses, and a
dead run's mark never blocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import git, hub_path, hub_tree, memsync_cmd, write
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

# Writes its file, then waits (without writing) until the test lets it finish.
AGENT = ("import os, pathlib, time\n"
         "mem = pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR'])\n"
         "(mem / 'runs' / 'owned.md').write_text('the run wrote this\\n')\n"
         "go = pathlib.Path(os.environ['GO_FILE'])\n"
         "while not go.exists():\n"
         "    time.sleep(0.05)\n")


def _start_run(memory: Path, tmp_path: Path, run_id: str) -> tuple[subprocess.Popen[str], Path]:
    go = tmp_path / f"go-{run_id}"
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", run_id, "--checkpoint", "0", "--",
                             sys.executable, "-c", AGENT], cwd=memory, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, GO_FILE=str(go)))
    deadline = time.monotonic() + 30
    while not (memory / "runs" / "owned.md").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    return proc, go


def _finish(proc: subprocess.Popen[str], go: Path) -> str:
    go.touch()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


@pytest.mark.slow
def test_operator_verbs_refuse_during_a_run_and_the_run_keeps_its_files(memory: Path, tmp_path: Path) -> None:
    first = git("rev-parse", "HEAD", cwd=memory).strip()
    proc, go = _start_run(memory, tmp_path, "owner-1")
    try:
        for verb in (["push"], ["pull"], ["restore", "summary.md", "--at", first], ["revert", first]):
            done = memsync_cmd(*verb, cwd=memory)
            assert done.returncode == 6, (verb, done.stderr)
            assert f"error: memory 'research' is in use by run owner-1 (pid {proc.pid})" in done.stderr
            assert "hint: wait for the run to end" in done.stderr
        assert "runs/owned.md" not in hub_tree(), "nothing of the run reached the hub as the operator's"
        status = memsync_cmd("status", "--json", cwd=memory)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["running"]["run_id"] == "owner-1"
        assert f"Run in progress: owner-1 (pid {proc.pid})" in memsync_cmd("status", cwd=memory).stdout
    finally:
        _finish(proc, go)
    log = git("log", "--format=%an", "memory/research", "--", "runs/owned.md", cwd=hub_path()).splitlines()
    assert log == ["memsync run owner-1"], "the run's file is credited to the run alone"
    assert memsync_cmd("push", cwd=memory).returncode == 0, "after the run the operator verbs work again"


@pytest.mark.slow
def test_second_run_in_the_same_directory_waits_then_refuses(memory: Path, tmp_path: Path) -> None:
    proc, go = _start_run(memory, tmp_path, "owner-2")
    try:
        started = time.monotonic()
        second = memsync_cmd("run", "--run-id", "second", "--", "sh", "-c", "echo second > second.md",
                             cwd=memory, env=dict(os.environ, MEMSYNC_LOCK_TIMEOUT="1"))
        assert second.returncode == 6, second.stderr
        assert time.monotonic() - started >= 1.0, "it waited its turn first"
        assert "in use by run owner-2" in second.stderr and "MEMSYNC_LOCK_TIMEOUT" in second.stderr
        assert not (memory / "second.md").exists(), "the second command never ran"
        assert "runs/owned.md" not in hub_tree()
    finally:
        _finish(proc, go)
    assert "Memsync-Run-Id: owner-2" in git("log", "-1", "--format=%(trailers)", "memory/research", "--",
                                            "runs/owned.md", cwd=hub_path())


@pytest.mark.slow
def test_second_run_proceeds_when_the_first_ends_within_the_wait(memory: Path, tmp_path: Path) -> None:
    proc, go = _start_run(memory, tmp_path, "owner-3")
    second = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "next", "--", "sh", "-c",
                               "echo next > next.md"], cwd=memory, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    assert second.stderr is not None
    waiting = second.stderr.readline()  # said as soon as it meets the first run's claim
    assert "is in use by run owner-3" in waiting and "waiting up to" in waiting, waiting
    assert second.poll() is None, "the second run waits while the first owns the memory"
    assert not (memory / "next.md").exists(), "its command has not started"
    _finish(proc, go)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    tree = hub_tree()
    assert tree["next.md"] == b"next\n" and tree["runs/owned.md"] == b"the run wrote this\n"
    by = {p: git("log", "-1", "--format=%an", "memory/research", "--", p, cwd=hub_path()).strip()
          for p in ("next.md", "runs/owned.md")}
    assert by == {"next.md": "memsync run next", "runs/owned.md": "memsync run owner-3"}


@pytest.mark.slow
def test_a_dead_runs_mark_does_not_block(memory: Path, tmp_path: Path) -> None:
    """kill -9 of memsync itself leaves its mark behind: the next command ignores it."""
    go = tmp_path / "never"
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "run", "--run-id", "killed", "--checkpoint", "0", "--",
                             sys.executable, "-c", AGENT], cwd=memory, env=dict(os.environ, GO_FILE=str(go)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    mark = memory / ".git" / "memsync-run.json"
    deadline = time.monotonic() + 30
    while not (memory / "runs" / "owned.md").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert json.loads(mark.read_text())["run_id"] == "killed"
    os.killpg(proc.pid, 9)
    proc.wait()
    assert mark.exists(), "the mark outlives a kill -9"
    done = memsync_cmd("push", cwd=memory)
    assert done.returncode == 0, done.stderr
    assert memsync_cmd("run", "--", "true", cwd=memory).returncode == 0


@pytest.mark.parametrize("pid_reused", [False, True])
@pytest.mark.slow
def test_a_stale_mark_with_a_reused_pid_does_not_block(memory: Path, pid_reused: bool) -> None:
    """A mark naming a live process that is not the run (its pid was reused) is stale too."""
    if pid_reused and not Path("/proc/self/stat").exists():
        pytest.skip("process start times are read from /proc")
    pid = os.getpid() if pid_reused else 2 ** 22 + 12345
    (memory / ".git" / "memsync-run.json").write_text(json.dumps({"run_id": "ghost", "pid": pid, "started": "1"}))
    write(memory, "summary.md", "# Summary\n\nby the operator\n")
    done = memsync_cmd("push", cwd=memory)
    assert done.returncode == 0, done.stderr
    assert hub_tree()["summary.md"] == b"# Summary\n\nby the operator\n"


@pytest.mark.slow
def test_an_agent_cannot_pass_its_work_off_as_the_operators(memory: Path, figures: Figures) -> None:
    """The agent runs `memsync push` itself, inside its run: refused (exit 6), and its file is
    committed by the run, not by an operator push."""
    figures.add("security attacks")
    script = ("echo 'agent work' > sneaky.md; memsync_exit=0; "
              f"{sys.executable} -m memsync push -m 'operator edit' || memsync_exit=$?; "
              "echo $memsync_exit > ../agent-push-exit")
    proc = memsync_cmd("run", "--run-id", "agent-1", "--checkpoint", "0", "--", "sh", "-c", script, cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert (memory.parent / "agent-push-exit").read_text().strip() == "6"
    authors = git("log", "--format=%an", "memory/research", "--", "sneaky.md", cwd=hub_path()).splitlines()
    assert authors == ["memsync run agent-1"]
    figures.add("security attacks refused")


@pytest.mark.slow
def test_a_tool_call_of_the_run_itself_goes_on(memory: Path) -> None:
    """What the MCP server does inside a run: a restore acting as the run that owns the memory."""
    first = git("rev-parse", "HEAD", cwd=memory).strip()
    write(memory, "summary.md", "# Summary\n\nchanged\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    code = ("import os, pathlib; from memsync.history import forensics; "
            "out = forensics.restore(pathlib.Path(os.environ['MEMSYNC_MEMORY_DIR']), ['summary.md'], "
            f"'{first}', run_id=os.environ['MEMSYNC_RUN_ID']); print(out.version)")
    proc = memsync_cmd("run", "--run-id", "tool-1", "--checkpoint", "0", "--", sys.executable, "-c", code,
                       cwd=memory)
    assert proc.returncode == 0, proc.stderr
    assert hub_tree()["summary.md"] == b"# Summary\n\nfirst line\n"
    # The run trusts only the commits it makes itself: the tool's version is folded into the
    # run's own commit (checked like any commit the agent makes), never the operator's.
    restored = git("log", "-1", "--format=%an%n%(trailers:key=Memsync-Actor,valueonly)",
                   "memory/research", "--", "summary.md", cwd=hub_path())
    assert restored.split() == ["memsync", "run", "tool-1", "run"]


def _state(memory: Path) -> tuple[str, ...]:
    """Everything a refused verb must leave as it was: refs here and on the hub, HEAD, the work
    tree, the object files (a repack or a purge changes them) and the run's file."""
    objects = sorted(str(p.relative_to(memory)) for p in (memory / ".git" / "objects").rglob("*") if p.is_file())
    return (git("for-each-ref", cwd=memory), git("rev-parse", "HEAD", cwd=memory),
            git("for-each-ref", cwd=hub_path()), git("status", "--porcelain", "--untracked-files=all", cwd=memory),
            "\n".join(objects), (memory / "runs" / "owned.md").read_text())


# Every verb that commits, pushes, rewrites or repacks (memory.OWNED_VERBS), as a user or an
# agent would type it. FIRST stands for the memory's first version.
WRITING = {
    "push": ["push"],
    "pull": ["pull"],
    "restore": ["restore", "summary.md", "--at", "FIRST"],
    "revert": ["revert", "FIRST"],
    "redact-path": ["redact", "summary.md", "--at", "FIRST", "--yes"],
    "redact-wipe": ["redact", "--secret", r"[\s\S]+", "--yes"],
    "redact-nothing": ["redact", "--secret", "no such text anywhere", "--yes"],
    "redact-unconfirmed": ["redact", "--secret", "first"],
    "redact-follow": ["redact", "--follow", "--yes"],
    "redact-drop-backups": ["redact", "--drop-backups", "--yes"],
    "gc": ["gc"],
    "watch": ["watch", "--debounce", "0.1", "--poll", "0.5"],
    "watch-once": ["watch", "--once"],
    "accept": ["accept", "FIRST"],
    "reject": ["reject", "FIRST", "--reason", "no"],
}


@pytest.mark.stress  # the security suite: an agent's or an operator's verb against a live run
@pytest.mark.parametrize("verb", sorted(WRITING))
def test_every_writing_verb_refuses_during_a_run_before_writing_anything(memory: Path, tmp_path: Path, verb: str,
                                                                         figures: Figures) -> None:
    figures.add("security attacks")
    first = git("rev-parse", "HEAD", cwd=memory).strip()
    write(memory, "summary.md", "# Summary\n\nsecond line\n")
    assert memsync_cmd("push", cwd=memory).returncode == 0
    proc, go = _start_run(memory, tmp_path, f"own-{verb}")
    try:
        before = _state(memory)
        args = [first if a == "FIRST" else a for a in WRITING[verb]]
        done = memsync_cmd(*args, cwd=memory, timeout=60)
        assert done.returncode == 6, (verb, done.stderr)
        lines = done.stderr.splitlines()
        assert lines[0] == f"error: memory 'research' is in use by run own-{verb} (pid {proc.pid})", done.stderr
        assert lines[1].startswith("hint: wait for the run to end"), done.stderr
        assert "Traceback" not in done.stderr
        assert _state(memory) == before, f"{verb} wrote something"
    finally:
        _finish(proc, go)
    assert "runs/owned.md" in hub_tree()
    assert git("log", "-1", "--format=%an", "memory/research", "--", "runs/owned.md",
               cwd=hub_path()).strip() == f"memsync run own-{verb}"
    figures.add("security attacks refused")


@pytest.mark.stress
def test_a_hook_refuses_during_a_run_and_still_exits_0(memory: Path, tmp_path: Path, figures: Figures) -> None:
    """A coding agent's hook on the run's own directory: one line, nothing written; exit 0 as
    every hook (a failing hook would block the agent)."""
    figures.add("security attacks")
    proc, go = _start_run(memory, tmp_path, "own-hook")
    try:
        before = _state(memory)
        done = subprocess.run([sys.executable, "-m", "memsync", "hooks", "run", "stop", "--agent", "claude-code",
                               "--memory", "research", "--dir", str(memory)], input="{}", capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"memsync: stop hook: memory 'research' is in use by run own-hook (pid {proc.pid}) (wait for the run "
            "to end (it commits and pushes its own files), then `memsync hooks run` again; a run whose process is "
            "gone no longer counts)"]
        assert _state(memory) == before
    finally:
        _finish(proc, go)
    figures.add("security attacks refused")


@pytest.mark.stress
def test_an_agent_cannot_wipe_the_hub_with_redact_inside_its_run(memory: Path, figures: Figures) -> None:
    """The agent runs `memsync redact` with a match-everything pattern, then one that matches
    nothing, inside its own run: both refused (exit 6) before writing; the hub's history is
    intact, the run ends normally and its record is pushed, as the run's."""
    figures.add("security attacks")
    first = git("rev-parse", "HEAD", cwd=memory).strip()
    redact = f"{sys.executable} -m memsync redact --yes --secret"
    script = ("echo 'agent work' > agent.md; "
              f"{redact} '[\\s\\S]+' 2> ../wipe.err; echo $? > ../wipe-exit; "
              f"{redact} 'nothing-matches-this' 2> ../none.err; echo $? > ../none-exit")
    proc = memsync_cmd("run", "--run-id", "agent-wipe", "--checkpoint", "0", "--", "sh", "-c", script, cwd=memory)
    assert proc.returncode == 0, proc.stderr
    for name in ("wipe", "none"):
        assert (memory.parent / f"{name}-exit").read_text().strip() == "6"
        assert "is in use by run agent-wipe" in (memory.parent / f"{name}.err").read_text()
    assert first in git("rev-list", "memory/research", cwd=hub_path()), "the hub's history was not rewritten"
    tree = hub_tree()
    assert tree["summary.md"] == b"# Summary\n\nfirst line\n" and tree["agent.md"] == b"agent work\n"
    end = git("log", "-1", "--format=%an%n%(trailers:key=Memsync-Run-Id,valueonly)", "memory/research",
              cwd=hub_path()).split()
    assert end[:3] == ["memsync", "run", "agent-wipe"] and "agent-wipe" in end[3:]
    actors = git("log", "--format=%(trailers:key=Memsync-Actor,valueonly)", f"{first}..memory/research",
                 cwd=hub_path()).split()
    assert actors and set(actors) == {"run"}, actors  # nothing since the run began is the operator's
    figures.add("security attacks refused")


@pytest.mark.stress
@pytest.mark.skipif(not hasattr(__import__("socket"), "SO_PEERCRED"), reason="memsync serve needs peer credentials")
def test_through_the_server_the_same_verbs_refuse(memory: Path, tmp_path: Path, figures: Figures) -> None:
    from tests.servers.test_serve import start_server, stop

    figures.add("security attacks")
    server = start_server(tmp_path / "s.sock")
    proc, go = _start_run(memory, tmp_path, "own-served")
    try:
        before = _state(memory)
        for args in (["redact", "--secret", r"[\s\S]+", "--yes"], ["gc"], ["watch", "--once"],
                     ["push"]):
            done = subprocess.run([sys.executable, "-m", "memsync", *args], cwd=memory, env=server.env(),
                                  capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            assert done.returncode == 6, (args, done.stderr)
            assert "is in use by run own-served" in done.stderr.splitlines()[0]
        assert _state(memory) == before
        assert server.proc.poll() is None
    finally:
        _finish(proc, go)
        stop(server)
    figures.add("security attacks refused")


def test_every_command_is_classified_for_run_ownership() -> None:
    """A new verb must say whether it writes (then it refuses during a run) or not."""
    import importlib

    import typer

    from memsync.cli.verbs import OCCASIONAL, register
    from memsync.core.memory import FREE_VERBS, OWNED_VERBS

    app = typer.Typer()  # a fresh one: the real app registers its occasional verbs once, wrapped
    register(app, lambda f: f)
    for module in set(OCCASIONAL.values()):
        importlib.import_module(f"memsync.cli.{module}").register(app, lambda f: f)
    names = {info.name or (info.callback.__name__ if info.callback else "") for info in app.registered_commands}
    for group in app.registered_groups:
        sub = group.typer_instance
        assert sub is not None
        names |= {f"{sub.info.name} {c.name}" for c in sub.registered_commands}
    assert names == OWNED_VERBS | FREE_VERBS, names ^ (OWNED_VERBS | FREE_VERBS)
