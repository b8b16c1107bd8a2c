"""The documents hold together: README stays a few screens long and links every document, and every link in README,
docs/ and deploy/ names a file of this repository that exists (never one outside it, nor a web address)."""

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "deploy").glob("*.md"))]
README_MOST_LINES = 260

FENCED = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def link_targets(text: str) -> list[str]:
    """The targets of the text's links and images, outside code (a `[x](y)` in code is no link)."""
    prose = CODE_SPAN.sub("", FENCED.sub("", text))
    return LINK.findall(prose)


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in link_targets(document.read_text()):
        path = unquote(target.split("#", 1)[0])
        if not path:
            continue  # an anchor of the same document
        if SCHEME.match(target) or path.startswith("/"):
            problems.append(f"{target}: outside the repository")
            continue
        resolved = (document.parent / path).resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{target}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
    return problems


def test_every_link_names_a_file_of_the_repository():
    broken = {str(d.relative_to(ROOT)): problems for d in DOCUMENTS if (problems := broken_links(d))}
    assert not broken


def test_the_readme_fits_on_a_few_screens():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines: move sections into docs/"


def test_the_readme_links_every_document():
    linked = {(ROOT / unquote(t.split("#", 1)[0])).resolve() for t in link_targets(README.read_text())}
    unlinked = [str(d.relative_to(ROOT)) for d in DOCUMENTS[1:] if d.resolve() not in linked]
    assert not unlinked


def test_a_link_out_of_the_repository_or_to_no_file_is_found(tmp_path):
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "here.png").write_bytes(b"")
    document = root / "docs" / "a.md"
    document.write_text(
        "[ok](here.png) ![ok](./here.png#x) [anchor](#top) `[code](nowhere.md)`\n"
        "[gone](missing.md) [up](../../outside.md) [web](https://example.com/) [abs](/etc/passwd)\n"
        "```\n[fenced](nowhere.md)\n```\n"
    )
    assert broken_links(document, root) == [
        "missing.md: no such file",
        "../../outside.md: outside the repository",
        "https://example.com/: outside the repository",
        "/etc/passwd: outside the repository",
    ]
