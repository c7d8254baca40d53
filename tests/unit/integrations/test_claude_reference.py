"""MemsyncMemoryTool against the Anthropic SDK's reference implementation of the memory tool.

Both tools (`BetaLocalFilesystemMemoryTool` from the installed `anthropic` package, and
`MemsyncMemoryTool(report_versions=False)`) are driven through the same command sequences, by the
SDK's own entry point (`call(input)`, what the tool runner does with a tool_use block). Every
step must give the same result (the same text, or a ToolError with the same text) and every case
must leave the same files, unless the step names a difference of DIFFERENCES: each is documented
in docs/SECURITY.md ("Measured against the SDK's reference tool") with its reason, and checked
here to be memsync's stricter side (a refusal where the reference acts or crashes).

The cases follow the map of the SDK's own test suite for its filesystem tool
(tests/lib/tools/memory_tools/test_filesystem.py: create, view, str_replace, insert, delete,
rename, path validation, symlinks, CRLF, file modes), with the edge and error cases of each.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._tool_dispatch import tool_error_content
from anthropic.tools.memory import BetaAsyncLocalFilesystemMemoryTool, BetaLocalFilesystemMemoryTool

from memsync.integrations.claude import AsyncMemsyncMemoryTool, MemsyncMemoryTool

Outcome = tuple[str, str]  # ("ok" | "error" | "crash", the text or the exception's type)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "SECURITY.md"


def _refuses(*words: str) -> Callable[[Outcome, Outcome], bool]:
    return lambda ref, mem: mem[0] == "error" and all(w in mem[1] for w in words)


# key -> (what memsync does instead, and a check that the step shows it)
DIFFERENCES: dict[str, Callable[[Outcome, Outcome], bool]] = {
    "guard-refusal": lambda ref, mem: ref[0] == "ok" and mem[0] == "error" and "looks destructive" in mem[1],
    "symlink-leaf": lambda ref, mem: ref == mem,  # the same words; the files left differ (the tree check)
    "symlink-wording": lambda ref, mem: mem == ("error", ref[1].replace(" directory", " directory via symlink")),
    "internal-path": lambda ref, mem: ref[0] == "ok" and _refuses("memsync's own data")(ref, mem),
    "secret-scan": lambda ref, mem: ref[0] == "ok" and _refuses("looks like a secret")(ref, mem),
    "empty-old-str": lambda ref, mem: ref[0] == "error" and _refuses("old_str is empty")(ref, mem),
    "many-occurrences": lambda ref, mem: ref[0] == "error" and mem[0] == "error" and mem[1].count(",") == 50,
    "result-bound": lambda ref, mem: ref[0] == mem[0] == "ok" and len(ref[1]) > 60_000 >= len(mem[1]),
    "trailing-slash": lambda ref, mem: ref[0] == mem[0] == "ok" and "//" in ref[1] and "//" not in mem[1],
    "sdk-crash": lambda ref, mem: ref[0] == "crash" and mem[0] == "error" and "\n" not in mem[1],
    "unknown-argument": lambda ref, mem: ref[0] == "ok" and _refuses("Unknown argument")(ref, mem),
    "version-suffix": lambda ref, mem: ref[0] == mem[0] == "ok" and mem[1].startswith(ref[1] + " (version "),
    "path-prefix": lambda ref, mem: "must start with" not in ref[1] and _refuses("Path must start with")(ref, mem),
}


@dataclass(frozen=True)
class Step:
    call: dict[str, Any] | None = None
    setup: Callable[[Path], None] | None = None  # done to both roots (what a hub or another process put there)
    differs: str | None = None
    again: bool = False  # memsync only: the refused call repeated, which must now do what the reference did


@dataclass(frozen=True)
class Case:
    steps: list[Step]
    seed: dict[str, str] = field(default_factory=dict)  # files there before the session started
    tree_differs: str | None = None
    umask: int | None = None
    report_versions: bool = False


def c(command: str, differs: str | None = None, **args: Any) -> Step:
    return Step({"command": command, **args}, differs=differs)


def create(path: str, text: str) -> Step:
    return c("create", path=f"/memories/{path}", file_text=text)


def raw(rel: str, data: bytes) -> Step:
    def put(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return Step(setup=put)


def link(rel: str, target: str | Callable[[Path], str]) -> Step:
    def put(root: Path) -> None:
        (root / rel).symlink_to(target(root) if callable(target) else target)
    return Step(setup=put)


def outside(root: Path) -> str:
    """A folder beside the memory with a secret in it (the same relative target for both tools)."""
    there = root.parent / "outside"
    there.mkdir(exist_ok=True)
    (there / "secret.txt").write_text("sensitive data")
    return "../outside"


M = "/memories"
NOTES = "".join(f"- note {i}: operation-based CRDTs need causal delivery, state-based ones a join\n"
                for i in range(100))  # 7.9 KB, about the size of the notes file of seed 004
CASES: dict[str, Case] = {
    # create
    "create": Case([create("test_file.txt", "Hello, World!"), c("view", path=M)]),
    "create-nested": Case([create("deep/nested/file.txt", "Nested file"), c("view", path=f"{M}/deep")]),
    "create-existing": Case([create("existing.txt", "Original"), create("existing.txt", "New")]),
    "create-over-directory": Case([create("d/f.txt", "x"), create("d", "y")]),
    "create-empty": Case([create("empty.md", ""), c("view", path=f"{M}/empty.md")]),
    "create-unicode": Case([create("ünï/cödé.md", "naïve — ✓\n"), c("view", path=f"{M}/ünï/cödé.md")]),
    "create-secret": Case([c("create", "secret-scan", path=f"{M}/creds.md",
                             file_text="token: ghp_" + "a1B2c3D4" * 4 + "e5F6\n")], tree_differs="secret-scan"),
    # view
    "view-file": Case([create("v.txt", "Line 1\nLine 2\nLine 3"), c("view", path=f"{M}/v.txt")]),
    "view-directory": Case([create("dir/file1.txt", "File 1"), create("dir/file2.txt", "File 2"),
                            create("dir/sub/deeper/x.txt", "x"), create(".hidden.md", "h"),
                            c("view", path=f"{M}/dir"), c("view", path=M)]),
    "view-root-trailing-slash": Case([create("a.md", "a"), c("view", "trailing-slash", path=f"{M}/")]),
    "view-range": Case([create("r.txt", "Line 1\nLine 2\nLine 3\nLine 4\nLine 5"),
                        c("view", path=f"{M}/r.txt", view_range=[2, 4]),
                        c("view", path=f"{M}/r.txt", view_range=[2, -1]),
                        c("view", path=f"{M}/r.txt", view_range=[0, 1]),
                        c("view", path=f"{M}/r.txt", view_range=[9, 12]),
                        c("view", path=f"{M}/r.txt", view_range=[3])]),
    "view-missing": Case([c("view", path=f"{M}/nonexistent.txt"), c("view", path=f"{M}/no/such/dir")]),
    "view-not-utf8": Case([raw("binary.dat", b"\xff\xfe\x80 not utf-8"),
                           c("view", "sdk-crash", path=f"{M}/binary.dat")]),
    "view-too-many-lines": Case([create("huge.txt", "\n".join(["line"] * 1_000_000)),
                                 c("view", path=f"{M}/huge.txt")]),
    "view-big-file": Case([create("big.txt", "y" * 100 + "\n" * 1 + ("z" * 99 + "\n") * 1_500),
                           c("view", "result-bound", path=f"{M}/big.txt")]),
    "view-crlf": Case([raw("crlf.txt", b"line1\r\nline2\r\nline3\r\n"), c("view", path=f"{M}/crlf.txt")]),
    # str_replace
    "str-replace": Case([create("s.txt", "Line 1\nOld Text\nLine 3"),
                         c("str_replace", path=f"{M}/s.txt", old_str="Old Text", new_str="New Text"),
                         c("view", path=f"{M}/s.txt")]),
    "str-replace-context": Case([create("s.txt", "".join(f"L{i}\n" for i in range(1, 11))),
                                 c("str_replace", path=f"{M}/s.txt", old_str="L5\n", new_str="five\nmore\n"),
                                 c("str_replace", path=f"{M}/s.txt", old_str="L1\n", new_str="")]),
    "str-replace-not-found": Case([create("s.txt", "Hello, World!"),
                                   c("str_replace", path=f"{M}/s.txt", old_str="NotFound", new_str="Python")]),
    "str-replace-twice": Case([create("s.txt", "Hello\nMiddle\nHello"),
                               c("str_replace", path=f"{M}/s.txt", old_str="Hello", new_str="Hi")]),
    "str-replace-many": Case([create("s.txt", "x\n" * 60),
                              c("str_replace", "many-occurrences", path=f"{M}/s.txt", old_str="x", new_str="y")]),
    "str-replace-empty-old": Case([create("s.txt", "abc"),
                                   c("str_replace", "empty-old-str", path=f"{M}/s.txt", old_str="", new_str="y")]),
    "str-replace-missing": Case([c("str_replace", path=f"{M}/nonexistent.txt", old_str="old", new_str="new"),
                                 create("d/f.txt", "x"),
                                 c("str_replace", path=f"{M}/d", old_str="old", new_str="new")]),
    "str-replace-crlf": Case([raw("crlf.txt", b"line1\r\nline2\r\nline3\r\n"),
                              c("str_replace", path=f"{M}/crlf.txt", old_str="line2", new_str="LINE2")]),
    # insert
    "insert": Case([create("i.txt", "Line 1\nLine 2"),
                    c("insert", path=f"{M}/i.txt", insert_line=1, insert_text="Inserted Line"),
                    c("insert", path=f"{M}/i.txt", insert_line=0, insert_text="First Line"),
                    c("insert", path=f"{M}/i.txt", insert_line=4, insert_text="Last Line\n"),
                    c("view", path=f"{M}/i.txt")]),
    "insert-into-empty": Case([create("e.txt", ""), c("insert", path=f"{M}/e.txt", insert_line=0, insert_text="a")]),
    "insert-out-of-range": Case([create("i.txt", "Line 1\nLine 2"),
                                 c("insert", path=f"{M}/i.txt", insert_line=10, insert_text="text"),
                                 c("insert", path=f"{M}/i.txt", insert_line=-1, insert_text="text")]),
    "insert-missing": Case([c("insert", path=f"{M}/nonexistent.txt", insert_line=0, insert_text="text")]),
    "insert-crlf": Case([raw("crlf.txt", b"line1\r\nline2\r\nline3\r\n"),
                         c("insert", path=f"{M}/crlf.txt", insert_line=1, insert_text="Inserted")]),
    # delete
    "delete": Case([create("delete_me.txt", "To be deleted"), c("delete", path=f"{M}/delete_me.txt"),
                    c("view", path=M)]),
    "delete-directory": Case([create("subdir/file.txt", "Content"), create("subdir/b/c.txt", "c"),
                              c("delete", path=f"{M}/subdir")]),
    "delete-missing": Case([c("delete", path=f"{M}/nonexistent.txt")]),
    "delete-root": Case([c("delete", path=M), c("delete", path=f"{M}/")]),
    "delete-existing-before-the-session": Case(
        [c("delete", "guard-refusal", path=f"{M}/notes.md")], seed={"notes.md": "x" * 400 + "\n"},
        tree_differs="guard-refusal"),
    "delete-existing-confirmed-by-repeating": Case(
        [c("delete", "guard-refusal", path=f"{M}/notes.md"),
         Step({"command": "delete", "path": f"{M}/notes.md"}, again=True),
         c("delete", path=f"{M}/notes.md"), c("view", path=M)], seed={"notes.md": "x" * 400 + "\n"}),
    "overwrite-existing-confirmed-by-repeating": Case(
        [c("str_replace", "guard-refusal", path=f"{M}/notes.md", old_str=NOTES[100:], new_str="short\n"),
         Step({"command": "str_replace", "path": f"{M}/notes.md", "old_str": NOTES[100:], "new_str": "short\n"},
              again=True),
         c("view", path=f"{M}/notes.md")], seed={"notes.md": NOTES}),
    # rename
    "rename": Case([create("old_name.txt", "Original content"),
                    c("rename", old_path=f"{M}/old_name.txt", new_path=f"{M}/new_name.txt")]),
    "rename-nested": Case([create("file.txt", "Content"),
                           c("rename", old_path=f"{M}/file.txt", new_path=f"{M}/nested/dir/file.txt")]),
    "rename-directory": Case([create("a/x.txt", "x"), create("a/b/y.txt", "y"),
                              c("rename", old_path=f"{M}/a", new_path=f"{M}/z")]),
    "rename-missing": Case([c("rename", old_path=f"{M}/nonexistent.txt", new_path=f"{M}/new.txt")]),
    "rename-onto-existing": Case([create("file1.txt", "File 1"), create("file2.txt", "File 2"),
                                  c("rename", old_path=f"{M}/file1.txt", new_path=f"{M}/file2.txt")]),
    "rename-root": Case([c("rename", old_path=M, new_path=f"{M}/x")]),
    "rename-into-itself": Case([create("a/x.txt", "x"),
                                c("rename", "sdk-crash", old_path=f"{M}/a", new_path=f"{M}/a/b")]),
    # paths
    "path-outside-memories": Case([create("../x.txt", "no"), c("create", path="/invalid/path.txt", file_text="x"),
                                   c("view", "path-prefix", path="/memoriesx/a.md"),
                                   c("view", path="memories/a.md")]),
    "path-escape": Case([create("../../../etc/passwd", "Escape attempt"), c("view", path=f"{M}/../../etc"),
                         c("delete", path=f"{M}/a/../../x")]),
    "path-dot-segments": Case([create("a/./b/../c.txt", "c"), c("view", path=f"{M}/a/c.txt"),
                               c("view", path=f"{M}/a//c.txt")]),
    "path-internal": Case([c("create", "internal-path", path=f"{M}/.git/config", file_text="x"),
                           c("create", "internal-path", path=f"{M}/.vm0/storage.yaml", file_text="x")]),
    "path-nul": Case([c("create", "sdk-crash", path=f"{M}/a\0b.md", file_text="x")]),
    # symlinks
    "symlink-outside": Case([link("escape_link", outside), c("view", "symlink-wording",
                                                            path=f"{M}/escape_link/secret.txt"),
                             c("create", "symlink-wording", path=f"{M}/escape_link/hacked.txt", file_text="bad"),
                             c("create", "symlink-wording", path=f"{M}/escape_link/nested/f.txt", file_text="x")]),
    "symlink-inside": Case([create("legit/file.txt", "content"), link("link", "legit"),
                            c("view", path=f"{M}/link/file.txt"),
                            c("str_replace", path=f"{M}/link/file.txt", old_str="content", new_str="changed")]),
    "symlink-delete-is-the-link": Case([create("summary.md", "keep me\n"), link("old-notes.md", "summary.md"),
                                        c("delete", "symlink-leaf", path=f"{M}/old-notes.md")],
                                       tree_differs="symlink-leaf"),
    "symlink-rename-is-the-link": Case([create("summary.md", "keep me\n"), link("old-notes.md", "summary.md"),
                                        c("rename", "symlink-leaf", old_path=f"{M}/old-notes.md",
                                          new_path=f"{M}/archived.md")],
                                       tree_differs="symlink-leaf"),
    # arguments
    "arguments-unknown": Case([create("a.md", "a"), c("view", "unknown-argument", path=f"{M}/a.md", verbose=True)]),
    "arguments-missing": Case([c("view", "sdk-crash"), c("create", "sdk-crash", path=f"{M}/x.md")],
                              tree_differs="sdk-crash"),  # the reference leaves an empty x.md behind
    "arguments-wrong-type": Case([create("a.md", "a"),
                                  c("insert", "sdk-crash", path=f"{M}/a.md", insert_line="two", insert_text="x")]),
    # what the result says about versions
    "version-suffix": Case([c("create", "version-suffix", path=f"{M}/a.md", file_text="a"),
                            c("insert", "version-suffix", path=f"{M}/a.md", insert_line=1, insert_text="b"),
                            c("view", path=f"{M}/a.md")], report_versions=True),
    # file modes
    "modes-under-umask-0": Case([create("deep/er/n.md", "n"), create("top.md", "t"),
                                 c("str_replace", path=f"{M}/top.md", old_str="t", new_str="u"),
                                 c("rename", old_path=f"{M}/top.md", new_path=f"{M}/moved/top.md")], umask=0),
}


def outcome(tool: Any, command: dict[str, Any]) -> Outcome:
    try:
        return "ok", str(tool.call(dict(command)))
    except ToolError as exc:
        content = tool_error_content(exc)
        return "error", content if isinstance(content, str) else str(content)
    except Exception as exc:  # the reference tool crashes on some input: that is what it does
        return "crash", type(exc).__name__


def snapshot(root: Path, modes: bool) -> dict[str, Any]:
    """Every file (its bytes), symlink (its target) and, with `modes`, folder and mode under root;
    memsync's own top-level entries (.git, .vm0, .gitattributes) are not the memory's files."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d not in (".git", ".vm0")]
            filenames = [f for f in filenames if f != ".gitattributes"]
        for name in [*filenames, *(d for d in dirnames if (here / d).is_symlink())]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            else:
                found[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) if modes else path.read_bytes()
        if modes:
            for d in dirnames:
                if not (here / d).is_symlink():
                    found[(here / d).relative_to(root).as_posix() + "/"] = stat.S_IMODE((here / d).stat().st_mode)
    return found


@pytest.fixture
def umask() -> Iterator[Callable[[int], int]]:
    saved = os.umask(0o022)
    os.umask(saved)
    yield os.umask
    os.umask(saved)


def seeded(root: Path, files: dict[str, str]) -> None:
    """`files` committed and pushed by an earlier session, so this session finds them."""
    if not files:
        return
    with MemsyncMemoryTool("research", root, run_id="seed-run", checkpoint_seconds=0, create=True) as t:
        for rel, text in files.items():
            t.call({"command": "create", "path": f"{M}/{rel}", "file_text": text})


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.slow
def test_the_same_results_as_the_sdk_reference_tool(name: str, tmp_path: Path,
                                                    umask: Callable[[int], int]) -> None:
    case = CASES[name]
    if case.umask is not None:
        umask(case.umask)
    reference = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "reference"))
    ref_root = reference.memory_root
    for rel, text in case.seed.items():
        (ref_root / rel).write_text(text)
    mem_root = tmp_path / "memsync" / "research"
    seeded(mem_root, case.seed)
    with MemsyncMemoryTool("research", mem_root, run_id="diff-run", checkpoint_seconds=0, checkpoint_writes=0,
                           create=True, report_versions=case.report_versions) as memsync_tool:
        ref: Outcome = ("none", "")
        for n, step in enumerate(case.steps):
            if step.setup is not None:
                step.setup(ref_root)
                step.setup(mem_root)
                continue
            assert step.call is not None
            where = f"{name} step {n} {step.call.get('command')}"
            if step.again:
                mem = outcome(memsync_tool, step.call)
                assert mem == ref, f"{where}: the repeated call gave {mem!r}, not the reference's {ref!r}"
                continue
            ref, mem = outcome(reference, step.call), outcome(memsync_tool, step.call)
            if step.differs is None:
                assert mem == ref, f"{where}: memsync {mem!r} != reference {ref!r}"
            else:
                assert DIFFERENCES[step.differs](ref, mem), f"{where} ({step.differs}): {mem!r} vs {ref!r}"
    modes = case.umask is not None
    if case.tree_differs is None:
        assert snapshot(mem_root, modes) == snapshot(ref_root, modes)
    else:
        assert snapshot(mem_root, modes) != snapshot(ref_root, modes)


def test_async_twins_give_the_same_results(tmp_path: Path) -> None:
    steps = [c("create", path=f"{M}/a/b.md", file_text="one\ntwo\n"), c("view", path=f"{M}/a/b.md"),
             c("str_replace", path=f"{M}/a/b.md", old_str="two", new_str="2"),
             c("insert", path=f"{M}/a/b.md", insert_line=0, insert_text="zero"),
             c("rename", old_path=f"{M}/a/b.md", new_path=f"{M}/c.md"), c("view", path=M),
             c("delete", path=f"{M}/c.md"), c("delete", path=f"{M}/c.md")]

    async def results(tool: Any) -> list[Outcome]:
        found = []
        for step in steps:
            assert step.call is not None
            try:
                found.append(("ok", str(await tool.call(dict(step.call)))))
            except ToolError as exc:
                found.append(("error", str(tool_error_content(exc))))
        return found

    async def main() -> None:
        reference = BetaAsyncLocalFilesystemMemoryTool(base_path=str(tmp_path / "reference"))
        async with AsyncMemsyncMemoryTool("research", tmp_path / "memsync" / "research", run_id="async-diff",
                                          checkpoint_seconds=0, create=True, report_versions=False) as mine:
            assert await results(mine) == await results(reference)

    anyio.run(main)


def test_every_difference_is_documented_with_its_reason() -> None:
    docs = DOCS.read_text()
    section = docs[docs.index("### Measured against the SDK's reference tool"):]
    used = {s.differs for case in CASES.values() for s in case.steps if s.differs} | {
        case.tree_differs for case in CASES.values() if case.tree_differs}
    assert used == set(DIFFERENCES)  # no difference declared and never shown, none shown and not declared
    for key in DIFFERENCES:
        assert f"`{key}`" in section, f"docs/SECURITY.md does not explain the difference {key}"


# -- the SDK suite's private-method tests, at memsync's own seams ---------------------------------
# tests/unit/integrations/test_claude_sdk_suite.py runs the SDK's own test file; the tests in it that patch the
# SDK's `_validate_path` or its `os.open` call have these equivalents: the check is
# MemoryFiles.target, the one open of a memory file is memtree.open_at.
READS = [{"command": "view", "path": f"{M}/notes.txt"},
         {"command": "str_replace", "path": f"{M}/notes.txt", "old_str": "outside", "new_str": "x"},
         {"command": "insert", "path": f"{M}/notes.txt", "insert_line": 0, "insert_text": "x"}]


def _outside(tmp_path: Path) -> Path:
    there = tmp_path / "outside.txt"
    there.write_text("outside")
    return there


@pytest.mark.attack
@pytest.mark.parametrize("command", READS, ids=lambda c: c["command"])
def test_a_link_planted_after_the_check(command: dict[str, Any], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    outside_file = _outside(tmp_path)
    with MemsyncMemoryTool("research", tmp_path / "research", checkpoint_seconds=0, create=True) as tool:
        files = tool._backend.files
        check = files.target

        def check_then_plant(rel: str, shown: str | None = None, *, follow: bool = True) -> Any:
            checked = check(rel, shown, follow=follow)
            (tool.session.root / checked.rel).symlink_to(outside_file)
            return checked

        monkeypatch.setattr(files, "target", check_then_plant)
        with pytest.raises(ToolError, match="is a symlink"):
            tool.call(dict(command))
        assert outside_file.read_text() == "outside" and (tool.session.root / "notes.txt").is_symlink()
        monkeypatch.undo()

        # a folder planted as a link to outside between the check and the listing: refused too
        def check_then_plant_folder(rel: str, shown: str | None = None, *, follow: bool = True) -> Any:
            checked = check(rel, shown, follow=follow)
            (tool.session.root / checked.rel).symlink_to(tmp_path, target_is_directory=True)
            return checked

        monkeypatch.setattr(files, "target", check_then_plant_folder)
        with pytest.raises(ToolError, match="is a symlink"):
            tool.call({"command": "view", "path": f"{M}/dir"})


@pytest.mark.attack
@pytest.mark.parametrize("command", READS, ids=lambda c: c["command"])
def test_a_link_planted_before_the_open(command: dict[str, Any], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from memsync.integrations import memtree

    outside_file = _outside(tmp_path)
    with MemsyncMemoryTool("research", tmp_path / "research", checkpoint_seconds=0, create=True) as tool:
        tool.call({"command": "create", "path": f"{M}/notes.txt", "file_text": "inside"})
        path = tool.session.root / "notes.txt"
        real_open = memtree.open_at

        def swap_then_open(name: str, flags: int, mode: int, dir_fd: int) -> int:
            monkeypatch.setattr(memtree, "open_at", real_open)
            path.unlink()
            path.symlink_to(outside_file)
            return real_open(name, flags, mode, dir_fd)

        monkeypatch.setattr(memtree, "open_at", swap_then_open)
        with pytest.raises(ToolError, match="is a symlink"):
            tool.call(dict(command))
        assert outside_file.read_text() == "outside" and path.is_symlink()


def test_the_checked_path_is_the_one_used(tmp_path: Path) -> None:
    with MemsyncMemoryTool("research", tmp_path / "research", checkpoint_seconds=0, create=True) as tool:
        tool.call({"command": "create", "path": f"{M}/legit/file.txt", "file_text": "content"})
        (tool.session.root / "link").symlink_to("legit", target_is_directory=True)
        checked = tool._backend.target(f"{M}/link/file.txt")
        assert checked.rel == "legit/file.txt"  # the link resolved once, at the check; used from here on
        (tool.session.root / "link").unlink()
        (tool.session.root / "link").symlink_to(tmp_path, target_is_directory=True)  # swapped after the check
        assert str(tool.call({"command": "view", "path": f"{M}/legit/file.txt"})).endswith("content")
