"""The document for a file's bytes: a notebook for `.ipynb`, Python otherwise.

Both kinds read, map positions and write back the same way (`files.PythonDocument`,
`notebooks.NotebookDocument`); the notebook module is imported only for notebooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from accumlint.source.files import PythonDocument

if TYPE_CHECKING:
    from accumlint.source.notebooks import NotebookDocument


def load_document(path: str, data: bytes) -> Union[PythonDocument, "NotebookDocument"]:
    """The document for a file's bytes: a notebook for `.ipynb`, Python otherwise."""
    if path.endswith(".ipynb"):
        from accumlint.source.notebooks import NotebookDocument

        return NotebookDocument.from_bytes(path, data)
    return PythonDocument.from_bytes(path, data)
