"""`--output-format gitlab`: a GitLab Code Quality report (a JSON array), for merge requests.

Each finding is an issue with `description`, `check_name`, `fingerprint`,
`severity` and `location` (`path`, `lines.begin`), the fields GitLab reads
(docs.gitlab.com, "Code Quality", implementing a custom tool). Paths are
relative to the project: an absolute path is made relative to
`$CI_PROJECT_DIR` (GitLab's checkout) or else the current folder.

The fingerprint identifies the issue across commits, so that GitLab can
tell new findings from old ones: it hashes the path, code, message and how
many identical findings came before it in the file, not the line, so a
finding keeps its fingerprint when code above it moves.
"""

from __future__ import annotations

import hashlib
import json
import os

from accumlint.check.engine import is_error
from accumlint.report import ReportOptions, notebook_file_line


def _relative(path: str) -> str:
    if os.path.isabs(path):
        root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
        path = os.path.relpath(path, root)
    return os.path.normpath(path).replace(os.sep, "/")


def _issue(d, document, seen: dict) -> dict:
    path = _relative(d.path)
    description = f"{d.code} {d.name}: {d.message}" if not is_error(d) else f"{d.name.replace('-', ' ')}: {d.message}"
    line = d.line
    if d.cell is not None:
        description = f"cell {d.cell}, line {d.line}: {description}"
        line = notebook_file_line(d, document) or 1
    identity = (path, d.code, d.message)
    seen[identity] = seen.get(identity, 0) + 1
    fingerprint = hashlib.sha256(json.dumps([*identity, seen[identity]]).encode("utf-8", "surrogateescape"))
    return {
        "type": "issue",
        "description": description,
        "check_name": d.code,
        "fingerprint": fingerprint.hexdigest(),
        "severity": "critical" if is_error(d) else "major",
        "location": {"path": path, "lines": {"begin": line}},
    }


def render(run, options: ReportOptions) -> str:
    documents = {f.path: f.document for f in run.files}
    seen: dict = {}
    issues = [_issue(d, documents.get(d.path), seen) for d in run.diagnostics]
    return json.dumps(issues, indent=2) + "\n"
