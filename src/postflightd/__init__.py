"""postflightd: the postflight of AI coding agents, done once and correctly.

The version and the project's URL. One of the shared top-level modules (layer 0 of
docs/architecture.md): ``errors``, ``models`` and the reporters read the version here, so
this module imports none of the package.

May import: the shared top-level modules (none that imports it back, as ``errors`` does).
"""

__version__ = "0.1.0"

#: The project's home page: ``[project.urls] Homepage`` in pyproject.toml, used when the
#: package's metadata cannot be read (a source tree on the path, never installed).
PROJECT_URL = "https://github.com/postflightd/postflightd"


def project_url() -> str:
    """The project's home page, from the installed package's metadata (its ``Project-URL``
    labelled ``Homepage``): the one URL SARIF output, the schema's ``$id`` and the docs give."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        entries = metadata("postflightd").get_all("Project-URL") or []
    except PackageNotFoundError:
        return PROJECT_URL
    for entry in entries:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() == "homepage" and url.strip():
            return str(url.strip().rstrip("/"))
    return PROJECT_URL
