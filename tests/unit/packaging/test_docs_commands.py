"""Every `sluice ...` command line shown in README.md, docs/*.md, the chart's README.md and
the chart's NOTES (what `helm install` prints) is a real command: its
sub-commands exist, every flag it names is one of that command's options, a choice such as
`json|table` offers only real choices, and a bracketed default such as `[--port 8443]` is
the real default. Every `make TARGET` the docs mention is a Makefile target."""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sluice.cli.main import _register, app

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "charts" / "sluice"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), CHART / "README.md"]
NOTES = CHART / "templates" / "NOTES.txt"

if not app.registered_groups:
    _register()


def code_spans(text: str) -> list[str]:
    """Fenced code block lines and inline `code` spans."""
    spans: list[str] = []
    fenced = False
    prose: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            spans.append(line)
        else:
            prose.append(line)
    spans += re.findall(r"`([^`]+)`", "\n".join(prose).replace("\n", " "))
    return spans


def sluice_lines(path: Path) -> list[str]:
    """Each `sluice <word> ...` command shown (a code line or span that starts with it),
    without its trailing # comment."""
    found = []
    for span in code_spans(path.read_text()):
        match = re.match(r"\s*(?:\$\s*)?(sluice [a-z][^#]*)", span)
        if match:
            found.append(match.group(1).strip())
    return found


def notes_lines() -> list[str]:
    """The commands NOTES.txt shows (`sluice ...` or `kubectl sluice ...` lines); a template
    action stands for a value, as a placeholder does."""
    found = []
    for line in NOTES.read_text().splitlines():
        match = re.match(r"\s*(?:kubectl )?(sluice [a-z].*)", re.sub(r"\{\{.*?\}\}", "X", line))
        if match:
            found.append(match.group(1).strip())
    return found


def documented_commands() -> list[tuple[str, str]]:
    return [(str(path.relative_to(REPO)), line) for path in DOCS for line in sluice_lines(path)] + [
        (str(NOTES.relative_to(REPO)), line) for line in notes_lines()
    ]


runner = CliRunner()


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    choices: frozenset[str] | None
    default: str | None
    takes_value: bool


@dataclass(frozen=True)
class Help:
    is_group: bool
    commands: frozenset[str]
    options: dict[str, Option]


@functools.cache
def help_of(path: tuple[str, ...]) -> Help | None:
    """What `sluice PATH --help` says (None: no such command), as a user reads it."""
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": None})
    if result.exit_code != 0:
        return None
    panels: dict[str, list[str]] = {}
    current = ""
    for line in result.output.splitlines():
        title = re.match(r"╭─ (\w+) ", line)
        if title:
            current = title.group(1)
        elif line.startswith("│") and current:
            panels.setdefault(current, []).append(line.strip("│ ").rstrip())
    commands = frozenset(
        row.split()[0] for row in panels.get("Commands", []) if re.match(r"[a-z]", row)
    )
    entries: list[str] = []
    for row in panels.get("Options", []):
        if re.match(r"(\*\s+)?-", row):
            entries.append(row.removeprefix("*").strip())
        elif entries:
            entries[-1] += " " + row.strip()
    options: dict[str, Option] = {}
    for entry in entries:
        head, _, rest = entry.partition("<")
        kind, _, text = rest.partition(">")
        names = tuple(head.split())
        choices = frozenset(kind.split("|")) if "|" in kind else None
        default = re.search(r"\[default: ([^\]]+)\]", text)
        option = Option(names, choices, default and default.group(1), kind != "bool")
        options.update(dict.fromkeys(names, option))
    return Help(bool(commands), commands, options)


def check_line(line: str) -> None:
    """Raise AssertionError when the documented command line is not the real command."""
    words = shlex.split(line.replace("[", " [ ").replace("]", " ] ").replace("\\", ""))[1:]
    path: tuple[str, ...] = ()
    help = help_of(path)
    assert help is not None
    while help.is_group and words and words[0] not in ("[", "]") and not words[0].startswith("-"):
        assert words[0] in help.commands, f"{line!r}: sluice {' '.join(path)} has no {words[0]}"
        path = (*path, words.pop(0))
        help = help_of(path)
        assert help is not None, f"{line!r}: sluice {' '.join(path)} --help fails"
    assert not help.is_group, f"{line!r}: sluice {' '.join(path)} needs a sub-command"
    bracket = False
    for i, word in enumerate(words):
        if word in ("[", "]"):
            bracket = word == "["
            continue
        if not word.startswith("-") or word == "-":
            continue
        flag, _, inline = word.partition("=")
        option = help.options.get(flag)
        assert option is not None, f"{line!r}: sluice {' '.join(path)} has no option {flag}"
        if not option.takes_value:
            continue
        value = inline or (words[i + 1] if i + 1 < len(words) else "")
        if value in ("", "[", "]") or value.isupper():
            continue  # a placeholder such as K or N
        if option.choices is not None and "|" in value:
            assert set(value.split("|")) <= option.choices, (
                f"{line!r}: {flag} offers {sorted(option.choices)}"
            )
        elif bracket and not inline and option.default is not None:
            # `[--flag value]` of a flag with a default shows the value used without it.
            assert option.default == value, (
                f"{line!r}: {flag} defaults to {option.default}, the docs say {value}"
            )


def test_the_docs_show_sluice_commands() -> None:
    lines = {line for _, line in documented_commands()}
    # the lookup itself must keep working: these are in the README
    assert any(line.startswith("sluice simulate ") for line in lines)
    assert any(line.startswith("sluice queue create ") for line in lines)
    assert any(line.startswith("sluice operator run ") for line in lines)
    notes = notes_lines()  # what `helm install` prints
    assert "sluice job list -n NAMESPACE" in notes
    assert any(line.startswith("sluice operator run --namespace X ") for line in notes)


@pytest.mark.parametrize(("doc", "line"), sorted(set(documented_commands())))
def test_documented_command_line_is_real(doc: str, line: str) -> None:
    check_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "sluice queue craete team-a",  # no such command
        "sluice queue create team-a --weigth 2",  # no such option
        "sluice queue list -o yaml|xml",  # no such choice
        "sluice webhooks serve --tls-cert-file a --tls-key-file b [--port 9443]",  # wrong default
        "sluice operator run [--lease-name sluice-leader]",  # wrong default
        "sluice queue",  # a group, not a command
    ],
)
def test_the_check_catches_a_wrong_command_line(line: str) -> None:
    with pytest.raises(AssertionError):
        check_line(line)


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, flags=re.MULTILINE))


def test_every_make_target_the_docs_mention_exists() -> None:
    mentioned = {
        (path.name, target)
        for path in DOCS
        for span in code_spans(path.read_text())
        for target in re.findall(r"(?:^|[\s(])make ([a-z][\w-]*)", span)
    }
    assert ("README.md", "test") in mentioned
    missing = {(doc, t) for doc, t in mentioned if t not in make_targets()}
    assert not missing, f"make targets the docs name but the Makefile lacks: {sorted(missing)}"


def test_ci_runs_the_readme_test_command() -> None:
    """The README calls `make test` the whole suite and what CI runs."""
    ci = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert ci[-1] == "make test"
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Try it, test it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    assert re.search(r"^make test\b", block, flags=re.MULTILINE)
