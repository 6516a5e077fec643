"""A stack file that is not YAML ends the preview in one line, `file:line:column: problem`, exit 2: no
traceback, and the file named the way an editor can open it."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.mock_runtime import StackFileError, load_stack_config
from tools import preview

BAD_INDENT = """\
config:
  gke-tpu-priority:platform:
    project: p
    tpuPools:
      - name: a
        topology: 2x2
       slices: 2
"""


def stack_root(tmp_path: Path, text: str) -> Path:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.bad.yaml").write_text(text)
    return tmp_path


def test_yaml_error_names_file_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(StackFileError) as caught:
        load_stack_config("bad", stack_root(tmp_path, BAD_INDENT))
    assert str(caught.value) == (
        "stacks/Pulumi.bad.yaml:7:8: expected <block end>, but found '<block mapping start>' "
        "(while parsing a block collection); check this line's indentation against the lines above"
    )


def test_tab_and_unclosed_quote_are_located(tmp_path: Path) -> None:
    root = stack_root(tmp_path, 'config:\n  gke-tpu-priority:platform:\n    project: "p\n')
    with pytest.raises(StackFileError, match=r"^stacks/Pulumi\.bad\.yaml:\d+:\d+: "):
        load_stack_config("bad", root)


def test_config_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    with pytest.raises(StackFileError, match=r"^stacks/Pulumi\.bad\.yaml: `config` must be a mapping"):
        load_stack_config("bad", stack_root(tmp_path, "config: [a, b]\n"))


def test_preview_exits_2_with_the_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = stack_root(tmp_path, BAD_INDENT)
    monkeypatch.setattr(preview, "load_stack_config", lambda stack: load_stack_config(stack, root))
    assert preview.main(["--stack", "bad", "--build-dir", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: stacks/Pulumi.bad.yaml:7:8: expected <block end>") and "Traceback" not in err
    assert err.count("\n") == 1
    assert not (tmp_path / "build").exists()
