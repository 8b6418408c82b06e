"""The configuration reference, generated from the settings' own field descriptions
(:class:`pathweave.settings.Settings`): ``pathweave config table`` prints it, and
``docs/configuration.md`` is its output (a test keeps the two equal)."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from pathweave.settings import ENV_PREFIX, Settings

HEADER = """# Configuration

Every setting of `pathweave.settings.Settings`, generated from its description
(`pathweave config table > docs/configuration.md`; a test fails when this file is not its
output). A value comes from an argument, else the environment variable named here, else
`pathweave.toml` in the working directory (or the file named by `PATHWEAVE_CONFIG`; a section
is a table, the key the field's name), else the default. A `PATHWEAVE_*` variable or a TOML
key that names no setting is an error naming it; `pathweave config show` prints the effective
configuration as TOML with secrets masked.
"""


def default_text(field: FieldInfo) -> str:
    """A field's default as the table shows it: ``empty`` for an empty string or secret,
    ``unset`` for None, ``computed`` for a default made at start (such as the user data
    directory, which the description names), else the value."""
    if field.default_factory is not None:
        return "computed"
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(f"`{v}`" for v in value) or "empty"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _rows(fields: dict[str, FieldInfo], prefix: str) -> list[str]:
    return [f"| `{prefix}{name.upper()}` | {default_text(field)} | {_cell(field.description or '')} |"
            for name, field in fields.items()]


def settings_table() -> str:
    """The reference as Markdown: the top-level values, then one table per section
    (``PATHWEAVE_<SECTION>_<FIELD>``, the default, the description), in the settings' order."""
    head = ["| variable | default | meaning |", "| --- | --- | --- |"]
    plain = {n: f for n, f in Settings.model_fields.items()
             if not (isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel))}
    out = [HEADER, "## Top level", "", *head, *_rows(plain, ENV_PREFIX)]
    for name, field in Settings.model_fields.items():
        if name in plain:
            continue
        out += ["", f"## `{name}`", "", _cell(field.description or ""), "", *head,
                *_rows(field.annotation.model_fields, f"{ENV_PREFIX}{name.upper()}_")]
    return "\n".join(out) + "\n"
