"""docs/check_html.py fails on a tutorial page that is missing, lacks an image or lacks its table."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).parent.parent
SPEC = importlib.util.spec_from_file_location("check_html", ROOT / "docs" / "check_html.py")
check_html = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_html)
NOTEBOOKS = sorted((ROOT / "tutorials").glob("*.ipynb"))


def fake_site(tmp_path, images_per_page):
    """A built-site stand-in: one page per tutorial with ``images_per_page(notebook)`` images."""
    (tmp_path / "_images").mkdir()
    (tmp_path / "tutorials").mkdir()
    for notebook in NOTEBOOKS:
        tags = []
        for i in range(images_per_page(notebook)):
            (tmp_path / "_images" / f"{notebook.stem}-{i}.png").write_bytes(b"png")
            tags.append(f'<img alt="" src="../_images/{notebook.stem}-{i}.png" />')
        body = "".join(tags) + "<pre>| quantity | value |\n|---|---|\n</pre>"
        (tmp_path / "tutorials" / f"{notebook.stem}.html").write_text(f"<html><body>{body}</body></html>")
    return tmp_path


def test_every_notebook_draws_a_figure():
    assert NOTEBOOKS and all(check_html.figures_drawn(nb) >= 1 for nb in NOTEBOOKS)


def test_complete_site_passes(tmp_path, capsys):
    site = fake_site(tmp_path, check_html.figures_drawn)
    assert check_html.main([str(site)]) == 0
    assert f"{len(NOTEBOOKS)} tutorial pages" in capsys.readouterr().out


def test_missing_image_fails(tmp_path, capsys):
    site = fake_site(tmp_path, lambda nb: check_html.figures_drawn(nb) - (nb == NOTEBOOKS[0]))
    assert check_html.main([str(site)]) == 1
    assert NOTEBOOKS[0].name in capsys.readouterr().out


def test_missing_page_and_broken_image_fail(tmp_path, capsys):
    site = fake_site(tmp_path, check_html.figures_drawn)
    (site / "tutorials" / f"{NOTEBOOKS[-1].stem}.html").unlink()
    next((site / "_images").glob(f"{NOTEBOOKS[0].stem}-*.png")).unlink()
    assert check_html.main([str(site)]) == 1
    out = capsys.readouterr().out
    assert "missing" in out and "not found" in out


def test_missing_table_fails(tmp_path, capsys):
    site = fake_site(tmp_path, check_html.figures_drawn)
    page = site / "tutorials" / f"{NOTEBOOKS[1].stem}.html"
    page.write_text(page.read_text().replace("|---|", ""))
    assert check_html.main([str(site)]) == 1
    assert "closing table" in capsys.readouterr().out
