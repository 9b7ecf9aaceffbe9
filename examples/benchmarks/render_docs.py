"""Paste committed benchmark result tables into the user guide.

A page marks a block with

    <!-- BEGIN results: examples/benchmarks/results/a.md examples/benchmarks/results/b.md -->
    ...
    <!-- END results -->

and this script replaces what lies between the two markers with the named
Markdown result files (written by the benchmark scripts next to their JSON),
one after the other. A heading line of a result file (``# Title``) is pasted as
a bold line (``**Title**``), so that the page keeps one title and its own
heading levels. ``tests/test_doc_results.py`` checks that every block
in ``doc/`` equals what this script would write, so the numbers on the pages
are those of the committed result files.

Usage (from the repository root)::

    python examples/benchmarks/render_docs.py            # rewrite doc/*.md in place
    python examples/benchmarks/render_docs.py --check    # exit 1 if a page is out of date
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(<!-- BEGIN results: (?P<files>[^>]*?) -->\n)(?P<body>.*?)(<!-- END results -->)", re.S)


HEADING = re.compile(r"^#{1,6} +(?P<title>.+?) *#* *$", re.M)


def paste(result):
    """The text of a result file as it goes into a page: headings (outside code fences) become bold lines."""
    lines, fenced = [], False
    for line in result.strip().split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        lines.append(line if fenced else HEADING.sub(lambda m: f"**{m.group('title')}**", line))
    return "\n".join(lines) + "\n"


def render(text, root=ROOT):
    """``text`` with every results block filled from its files (a missing file raises FileNotFoundError)."""

    def fill(match):
        parts = [paste((root / name).read_text()) for name in match.group("files").split()]
        return match.group(1) + "\n" + "\n".join(parts) + "\n" + match.group(4)

    return BLOCK.sub(fill, text)


def pages(root=ROOT):
    return [root / "README.md", *sorted((root / "doc").glob("*.md"))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Only report pages that are out of date.")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        new = render(text)
        if new != text:
            stale.append(page)
            if not args.check:
                page.write_text(new)
    for page in stale:
        print(f"{'out of date' if args.check else 'rewrote'}: {page.relative_to(ROOT)}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
