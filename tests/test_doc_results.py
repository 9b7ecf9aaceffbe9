"""The benchmark tables in doc/ are the committed result files (examples/benchmarks/render_docs.py)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("render_docs", ROOT / "examples" / "benchmarks" / "render_docs.py")
render_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_docs)


@pytest.mark.parametrize("page", render_docs.pages(ROOT), ids=lambda p: p.name)
def test_result_blocks_match_committed_files(page):
    text = page.read_text()
    assert render_docs.render(text, ROOT) == text, (
        f"{page.name} is out of date with its result files: run python examples/benchmarks/render_docs.py"
    )


def test_render_fills_a_block(tmp_path):
    (tmp_path / "r.md").write_text("| a |\n|---|\n| 1 |\n")
    text = "x\n<!-- BEGIN results: r.md -->\nold\n<!-- END results -->\ny\n"
    out = render_docs.render(text, tmp_path)
    assert out == "x\n<!-- BEGIN results: r.md -->\n\n| a |\n|---|\n| 1 |\n\n<!-- END results -->\ny\n"
    assert render_docs.render(out, tmp_path) == out  # idempotent


def test_render_turns_a_result_files_heading_into_a_bold_line(tmp_path):
    (tmp_path / "r.md").write_text("# Results (M=100)\n\n| a |\n|---|\n| 1 |\n")
    text = "# Page\n<!-- BEGIN results: r.md -->\n<!-- END results -->\n"
    out = render_docs.render(text, tmp_path)
    assert out == "# Page\n<!-- BEGIN results: r.md -->\n\n**Results (M=100)**\n\n| a |\n|---|\n| 1 |\n\n<!-- END results -->\n"
    assert out.count("\n# ") == 0 and out.startswith("# Page")
