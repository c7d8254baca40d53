"""`.vm0/storage.yaml`: the memory's configuration, readable by vm0 too.

vm0 writes `name` and `type`; memsync adds optional keys. An unknown key is a warning, a malformed
file is an error naming the file and line. Writes are atomic (temp file + os.replace).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.core.root import CONFIG_DIR as CONFIG_DIR  # (kept here too: where callers look for them)
from memsync.core.root import CONFIG_FILE as CONFIG_FILE
from memsync.core.root import find_root as find_root
from memsync.errors import ConfigError
from memsync.util import fs
from memsync.util.names import check_name, check_type, valid_branch
from memsync.util.records import field, recordclass

if TYPE_CHECKING:  # imported where a configuration sets them: a status reads neither
    from memsync.checks.merge_policy import MergeRule
    from memsync.core.pacing import PushRate

SECRETS_POLICIES = ("warn", "block", "off")
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024
KNOWN_KEYS = ("name", "type", "remote", "branch", "protect", "max_file_size", "secrets", "merge",
              "max_push_rate", "trust_redactions")


@recordclass
class StorageConfig:
    name: str
    type: str = "memory"
    remote: str | None = None
    branch: str | None = None
    protect: list[dict[str, str]] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    secrets: str = "warn"
    merge: list[MergeRule] = field(default_factory=list)  # see merge_policy.py
    max_push_rate: PushRate | None = None  # see pacing.py
    # follow every redaction of this memory's own hub, not only those that replace nothing but
    # what the secret scanner recognises (redaction.py); never set by a hub, only by the operator
    trust_redactions: bool = False
    warnings: list[str] = field(default_factory=list, compare=False)

    @property
    def hub_branch(self) -> str:
        return self.branch or f"{self.type}/{self.name}"


def config_path(root: Path) -> Path:
    return root / CONFIG_DIR / CONFIG_FILE


_SIMPLE_LINE = re.compile(r"([a-z_]+): ([A-Za-z/][A-Za-z0-9_./@+-]*(?::[A-Za-z0-9_./@+-]+)*)")  # a path, a URL, a word
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _simple_mapping(text: str) -> dict[str, str] | None:
    """storage.yaml as memsync writes it (`key: plain-word` lines) read without loading PyYAML
    (its import slows start-up: docs/PERFORMANCE.md); anything else returns None and goes to yaml,
    with the same result."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SIMPLE_LINE.fullmatch(line)
        if match is None or match.group(2).lower() in _YAML_WORDS or match.group(1) in found:
            return None
        found[match.group(1)] = match.group(2)
    return found or None


def _parse_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError as exc:
        raise ConfigError(f"{path} is a directory, not a file", "remove it and run `memsync init`") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text", "rewrite it as plain YAML") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    simple = _simple_mapping(text)
    if simple is not None:
        return simple
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        hint = "keep one of the two lines" if "given twice" in problem else "fix the YAML syntax at that line"
        raise ConfigError(f"{path}{where}: {problem}", hint) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML", "fix the YAML syntax") from exc


def _unique_key_loader() -> Any:
    """yaml's SafeLoader, refusing a key given twice in one mapping. PyYAML keeps the last value
    silently, so `secrets: block` followed further down by `secrets: off` would read as off."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def load(root: Path) -> StorageConfig:
    path = config_path(root)
    data = _parse_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with at least `name:`",
                          "write e.g. `name: research` (see the README, Configuration)")
    cfg = from_mapping(data, str(path))
    from memsync.util import notices

    for warning in cfg.warnings:
        notices.warn(warning)
    return cfg


def from_mapping(data: dict[Any, Any], where: str) -> StorageConfig:
    warnings = [f"{where}: unknown key {k!r} ignored" for k in data if k not in KNOWN_KEYS]
    name = data.get("name")
    if not isinstance(name, str):
        raise ConfigError(f"{where}: `name` is missing or not a string", "add e.g. `name: research`")
    try:
        check_name(name)
        kind = check_type(str(data.get("type") or "memory"))
    except Exception as exc:  # InvalidName / UsageError: re-raise as a config problem
        msg = getattr(exc, "message", str(exc))
        raise ConfigError(f"{where}: {msg}", getattr(exc, "hint", None)) from exc
    cfg = StorageConfig(name=name, type=kind, warnings=warnings)
    cfg.remote = _opt_str(data, "remote", where)
    cfg.branch = _opt_str(data, "branch", where)
    if cfg.branch is not None and not valid_branch(cfg.branch):
        raise ConfigError(f"{where}: `branch: {cfg.branch}` is not a valid git branch name",
                          "use letters, digits, '-', '_', '.' and '/' (e.g. `branch: main`)")
    secrets = data.get("secrets", "warn")
    if secrets is False:
        secrets = "off"
    if secrets not in SECRETS_POLICIES:
        raise ConfigError(f"{where}: `secrets` must be one of {', '.join(SECRETS_POLICIES)}",
                          "write e.g. `secrets: block` (or remove the line: the default is warn)")
    cfg.secrets = str(secrets)
    size = data.get("max_file_size", DEFAULT_MAX_FILE_SIZE)
    cfg.max_file_size = parse_size(size, where)
    protect = data.get("protect") or []
    if protect:  # (only then: the rules' code is not imported for nothing)
        from memsync.checks.protect import parse_protect

        try:
            parse_protect(protect)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}", "see the README, Configuration: protect") from exc
    cfg.protect = protect
    from memsync.checks.merge_policy import STRATEGIES, parse_rules

    try:
        cfg.merge = parse_rules(data.get("merge"))
    except ValueError as exc:
        raise ConfigError(f"{where}{_key_line(where, 'merge')}: {exc}",
                          f"write e.g. `merge: [{{path: \"*.jsonl\", strategy: union}}]`; strategies: "
                          f"{', '.join(STRATEGIES)} (see the README, Configuration: merge)") from exc
    rate = data.get("max_push_rate")
    if rate is not None:
        from memsync.core.pacing import parse_rate

        try:
            cfg.max_push_rate = parse_rate(str(rate))
        except ValueError as exc:
            raise ConfigError(f"{where}{_key_line(where, 'max_push_rate')}: `max_push_rate` {exc}",
                              "write e.g. `max_push_rate: 6/min` (also /s, /h)") from exc
    trust = data.get("trust_redactions", False)
    if not isinstance(trust, bool):
        raise ConfigError(f"{where}{_key_line(where, 'trust_redactions')}: `trust_redactions` must be true or false",
                          "write `trust_redactions: true` to follow every redaction of this memory's hub "
                          "(see docs/SECURITY.md, Redaction)")
    cfg.trust_redactions = trust
    return cfg


def _key_line(where: str, key: str) -> str:
    """`:N`, the line of a top-level `key:` in the file `where`, for error messages."""
    try:
        lines = Path(where).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    return next((f":{n}" for n, line in enumerate(lines, 1) if line.startswith(f"{key}:")), "")


def _opt_str(data: dict[Any, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where}: `{key}` must be a string", f"write it as text, e.g. `{key}: ...` in quotes")
    return value


_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
          "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_size(value: object, where: str) -> int:
    """`10 MiB`, `512k`, `1048576` -> bytes."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: `max_file_size` must be a size like 10MiB", "write e.g. 10MiB or 512KiB")
    if isinstance(value, int) and value > 0:
        return value
    text = str(value).strip().lower().replace(" ", "")
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits):]
    try:
        number = float(digits)
    except ValueError:
        number = -1.0
    if number <= 0 or unit not in _UNITS:
        raise ConfigError(f"{where}: `max_file_size` {value!r} is not a size", "write e.g. 10MiB or 512KiB")
    return int(number * _UNITS[unit])


def render(cfg: StorageConfig) -> str:
    """The YAML memsync writes for a new memory: vm0's keys first, ours only when set."""
    lines = [f"name: {cfg.name}", f"type: {cfg.type}"]
    if cfg.remote:
        lines.append(f"remote: {cfg.remote}")
    if cfg.branch:
        lines.append(f"branch: {cfg.branch}")
    return "\n".join(lines) + "\n"


def atomic_write(path: Path, text: str) -> None:
    """storage.yaml (and other text settings) written whole or not at all (util.fs.atomic_write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fs.atomic_write(path, text.encode("utf-8"))
