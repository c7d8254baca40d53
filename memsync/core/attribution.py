"""Who made a version: the actor, the run, the host, as git author and trailers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from memsync.util.names import host_name
from memsync.util.records import field, recordclass

if TYPE_CHECKING:
    from memsync.git.repo import GitRepo

Actor = Literal["run", "operator", "watch"]


@recordclass(frozen=True)
class Attribution:
    actor: Actor
    subject: str
    run_id: str | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())

    def trailers(self, flags: list[str]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = [("Memsync-Actor", self.actor)]
        if self.run_id:
            found.append(("Memsync-Run-Id", self.run_id))
        found.extend(self.extra)
        found.append(("Memsync-Host", host_name()))
        found.extend(("Memsync-Flag", f) for f in flags)
        return found

    def author(self) -> tuple[str, str] | None:
        """Runs are authored by the run itself; others by the operator's git identity (None)."""
        if self.actor == "run" and self.run_id:
            return (f"memsync run {self.run_id}", f"run-{self.run_id}@{host_name()}")
        return None


def operator(subject: str, *extra: tuple[str, str]) -> Attribution:
    return Attribution("operator", subject, None, tuple(extra))


def acting(run_id: str | None, subject: str, *extra: tuple[str, str]) -> Attribution:
    """The run `run_id` if given (an agent's tool call), else the operator."""
    return Attribution("run", subject, run_id, tuple(extra)) if run_id else operator(subject, *extra)


def change_trailers(git: GitRepo, tree: str, parent_tree: str | None) -> list[tuple[str, str]]:
    """The trailers that record what a version about to be made changes (`tree` against its
    first parent's `parent_tree`), so that `memsync log` reads them instead of diffing the two
    trees (git/trailers.py, history/log.py)."""
    from memsync.git.trailers import CHANGES, COPY, changes_value, quote_path

    files, added, removed, copies = git.tree_counts(parent_tree, tree)
    return [(CHANGES, changes_value(files, added, removed, tree, parent_tree)),
            *((COPY, quote_path(path)) for path in copies)]
