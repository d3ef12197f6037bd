"""Streamlit's magic shows every bare expression of a page script on the page, a string too: a
page script's only bare string is its docstring (the first statement, which magic skips), so
that a note meant for the code's readers is never shown to a clinician."""

from __future__ import annotations

import ast
import re
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"


def page_scripts() -> list[Path]:
    """app/main.py and every page it navigates to."""
    main = APP / "main.py"
    pages = re.findall(r'st\.Page\(\s*"([^"]+\.py)"', main.read_text(encoding="utf-8"))
    assert pages, "no pages found in app/main.py"
    return [main, *(APP / page for page in pages)]


def stray_strings(script: Path) -> list[int]:
    """Lines of the script's top-level bare strings after its docstring."""
    body = ast.parse(script.read_text(encoding="utf-8")).body
    return [node.lineno for index, node in enumerate(body)
            if index > 0 and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)]


def test_no_page_script_shows_a_note_meant_for_its_readers() -> None:
    found = {script.name: stray_strings(script) for script in page_scripts()}
    assert len(found) >= 6
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_check_finds_a_stray_string(tmp_path: Path) -> None:
    script = tmp_path / "page.py"
    script.write_text('"""Docstring."""\nX = 1\n"""A note on X."""\n', encoding="utf-8")
    assert stray_strings(script) == [3]
