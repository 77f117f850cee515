"""MkDocs hook: the rules page's headings carry each rule's title on the site.

docs/rules.md heads each section with the bare code (``### PF405``), so the anchor a SARIF
report's helpUri points to on GitHub is ``#pf405``. On the site the heading, and the table of
contents with it, reads ``PF405 — session_id differs ...`` (the summary on the line below),
and keeps the anchor ``#pf405``.
"""

from __future__ import annotations

import re
from typing import Any

_SECTION = re.compile(r"^### (PF\d{3})\n\n\*\*\w+\*\*: (.+)$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """The rules page with ``### CODE — summary {#code}`` headings; other pages unchanged."""
    del kwargs
    if page.file.src_uri != "rules.md":
        return markdown
    return _SECTION.sub(_titled, markdown)


def _titled(section: re.Match[str]) -> str:
    code, summary = section[1], section[2]
    # Braces escaped: attr_list would read a summary's "{number}_{slug}" as attributes.
    title = summary.replace("{", "\\{").replace("}", "\\}")
    return f"### {code} — {title} {{#{code.lower()}}}" + section[0][len(f"### {code}") :]
