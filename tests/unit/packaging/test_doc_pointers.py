"""Every pointer between the docs resolves: a markdown link reaches its file (and its heading,
when it names one), and a reference such as ``docs/scheduler.md, *Topology*`` in the README,
the docs or the code names a file that exists and a section that file has. A section is a
heading, or a paragraph or list item that opens with its name in bold; a reference may name
the section's opening words only (*Two passes* for "Two passes: the decision pass and the
full pass")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
READMES = [ROOT / top / "README.md" for top in (".", "charts/sluice", "hack")]
DOCS = sorted([*READMES, *(ROOT / "docs").glob("*.md")])
CODE = sorted(p for top in ("sluice", "bench", "hack") for p in (ROOT / top).rglob("*.py"))

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# docs/x.md, then a section in italics or quotes: `docs/x.md`, *S*; docs/x.md (*S*); "S".
NAMED = re.compile(r"(docs/[\w-]+\.md)`?(?:,? \(?(?:\*([^*]+)\*|\"([^\"]+)\"))?")
# *S* in docs/x.md
NAMED_AFTER = re.compile(r"\*([^*]+)\* in (docs/[\w-]+\.md)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)
LEAD_IN = re.compile(r"^(?:[-*] +)?\*\*(.+?)\*\*", re.M)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def sections(doc: Path) -> list[str]:
    text = doc.read_text()
    return [s.lower() for s in HEADING.findall(text) + LEAD_IN.findall(text)]


def flat(path: Path) -> str:
    """The file's text with comment markers and line breaks folded into single spaces, so a
    reference wrapped over two lines reads as one."""
    text = path.read_text()
    if path.suffix == ".py":
        text = re.sub(r"\n\s*#+ ?", " ", text)
    return re.sub(r"\s+", " ", text)


def prose(text: str) -> str:
    """The markdown without its code blocks and code spans, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))


def link_problems(doc: Path) -> list[str]:
    problems = []
    for target in LINK.findall(prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            problems.append(f"{doc.name}: link to {target}: no such file")
        elif anchor and file.suffix == ".md":
            anchors = {slug(h) for h in HEADING.findall(file.read_text())}
            if anchor not in anchors:
                problems.append(f"{doc.name}: link to {target}: no such heading")
    return problems


def named_problems(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    text = flat(path)
    found = NAMED.findall(text) + [(n, s, "") for s, n in NAMED_AFTER.findall(text)]
    for name, italic, quoted in found:
        doc = root / name
        section = (italic or quoted).strip()
        where = path.relative_to(root)
        if not doc.exists():
            problems.append(f"{where}: {name}: no such file")
        elif section and not any(s.startswith(section.lower()) for s in sections(doc)):
            problems.append(f"{where}: {name}, *{section}*: no such section")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_resolve(doc: Path) -> None:
    assert link_problems(doc) == []


def test_named_sections_resolve() -> None:
    problems = [p for path in [*DOCS, *CODE] for p in named_problems(path)]
    assert problems == []


def test_a_pointer_to_a_missing_section_is_found(tmp_path: Path) -> None:
    """The checks themselves: each kind of pointer, right and wrong."""
    (tmp_path / "a.md").write_text("# A\n\n## Two passes: deciding\n\n**Its pods.** text\n")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#two-passes-deciding) [bad](a.md#nowhere) [gone](c.md) [web](https://x.y)\n"
        "`x[a](b)` is code, not a link\n"
    )
    assert link_problems(tmp_path / "b.md") == [
        "b.md: link to a.md#nowhere: no such heading",
        "b.md: link to c.md: no such file",
    ]
    assert sections(tmp_path / "a.md") == ["a", "two passes: deciding", "its pods."]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "scheduler.md").write_text("# S\n\n## Two passes: deciding\n")
    (tmp_path / "docs" / "operations.md").write_text("### A replica that loses its Lease\n")
    (tmp_path / "loop.py").write_text(
        '"""docs/scheduler.md, *Two passes* and (docs/operations.md, "A replica that\n'
        'loses its Lease").\n"""\n# See docs/scheduler.md, *Placement*\n# docs/none.md\n'
        "# *Two passes* in docs/scheduler.md; *Cost* in docs/scheduler.md\n"
    )
    assert named_problems(tmp_path / "loop.py", tmp_path) == [
        "loop.py: docs/scheduler.md, *Placement*: no such section",
        "loop.py: docs/none.md: no such file",
        "loop.py: docs/scheduler.md, *Cost*: no such section",
    ]
