"""Suite-wide rules: a skipped (or expected-to-fail) test is a failure, here as in CI."""

from __future__ import annotations

import pytest

_not_run: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _not_run.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _not_run and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _not_run:
        terminalreporter.write_line(
            f"FAILED: {len(_not_run)} test(s) were skipped or xfailed; every test must run:",
            red=True,
        )
        for nodeid in _not_run:
            terminalreporter.write_line(f"  {nodeid}", red=True)
