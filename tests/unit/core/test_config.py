"""storage.yaml: the plain-lines fast path reads exactly what PyYAML reads, or defers to it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memsync.core import config

CASES = [
    "name: research\ntype: memory\n",
    "name: research\ntype: memory\nremote: git@github.com:acme/mem.git\nbranch: main\n",
    "name: research\nremote: https://example.org/a/b.git\n",
    "name: research\nremote: /srv/hub.git\n",
    "# comment\nname: research\n\ntype: artifact\n",
    "name: research\nsecrets: off\n",
    "name: research\nsecrets: block\n",
    "name: research\nmax_file_size: 10MiB\n",
    "name: research\nmax_file_size: 1048576\n",
    "name: research  # trailing comment\n",
    "name: 'research'\n",
    "name: research\ntype: yes\n",
    "name: research\nprotect:\n  - {path: 'runs/**', mode: append-only}\n",
    "name: research\nname: other\n",
    "name: research\nremote: ssh://git@host:2222/srv/hub.git\n",
    "name: null\n",
    "name: research\nbranch: memory/research\n",
]


@pytest.mark.parametrize("text", CASES)
def test_fast_path_agrees_with_yaml(text: str) -> None:
    fast = config._simple_mapping(text)
    if fast is not None:
        assert fast == yaml.safe_load(text)


def test_what_memsync_writes_takes_the_fast_path() -> None:
    written = config.render(config.StorageConfig(name="research", remote="git@github.com:acme/mem.git"))
    assert config._simple_mapping(written) == {"name": "research", "type": "memory",
                                               "remote": "git@github.com:acme/mem.git"}
    assert config._simple_mapping("name: research\nsecrets: off\n") is None  # a YAML boolean: PyYAML decides


def test_load_gives_the_same_config_either_way(tmp_path: Path) -> None:
    for text in CASES[:9]:
        path = tmp_path / ".vm0" / "storage.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        assert config.load(tmp_path) == config.from_mapping(yaml.safe_load(text), str(path))
