"""Check the built docs: every tutorial has its page, with an image for every figure its notebook draws.

Usage: ``python docs/check_html.py [HTML_DIR]`` (default ``docs/_build/html``). Exits with status 1
and one line per problem when a page, an image or a notebook's closing table is missing.
"""

import html.parser
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURE_CALL = re.compile(r"\bplt\.(subplots|figure|subplot_mosaic)\(")


class _Images(html.parser.HTMLParser):
    """Collects the ``src`` of every ``<img>`` and the page's text."""

    def __init__(self):
        super().__init__()
        self.sources, self.text = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs).get("src", ""))

    def handle_data(self, data):
        self.text.append(data)


def figures_drawn(notebook):
    """Figure-creating pyplot calls in the notebook's code cells."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum(len(FIGURE_CALL.findall("".join(c["source"]))) for c in cells if c["cell_type"] == "code")


def check_page(notebook, html_dir):
    """Problems with one tutorial's page (an empty list when it is complete)."""
    page = html_dir / "tutorials" / f"{notebook.stem}.html"
    if not page.is_file():
        return [f"{page}: missing (tutorial {notebook.name})"]
    parser = _Images()
    parser.feed(page.read_text(encoding="utf-8"))
    images = [s for s in parser.sources if s.endswith(".png")]
    problems = [f"{page}: image {s} not found" for s in images if not (page.parent / s).is_file()]
    expected = max(figures_drawn(notebook), 1)
    if len(images) < expected:
        problems.append(f"{page}: {len(images)} images for the {expected} figures {notebook.name} draws")
    if "|---|" not in "".join(parser.text):
        problems.append(f"{page}: the closing table of key numbers is missing")
    return problems


def main(argv=None):
    """Check every tutorial's page; print the problems and return the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    html_dir = pathlib.Path(argv[0]) if argv else ROOT / "docs" / "_build" / "html"
    notebooks = sorted((ROOT / "tutorials").glob("*.ipynb"))
    problems = [] if notebooks else ["no tutorials found"]
    for notebook in notebooks:
        problems += check_page(notebook, html_dir)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{len(notebooks)} tutorial pages, each with its figures and closing table")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
