# -*- coding: utf-8 -*-
# Copyright: (c) 2026, DeployOpen
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set options in one section of an INI text (cloud.conf), keeping everything else as it was:
other sections, comments, order. Pure text in, text out."""

from __future__ import annotations

import re
from typing import Any, Mapping

_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")
_OPTION = re.compile(r"^\s*(?P<key>[A-Za-z0-9_.-]+)\s*[=:]")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ini_set_options(text: str | None, section: str, options: Mapping[str, Any]) -> str:
    """Return ``text`` with ``options`` set in ``[section]``; a ``None`` value removes the option."""
    for key, value in options.items():
        if value is not None and ("\n" in _render(value) or "\r" in _render(value)):
            raise ValueError(f"value of {key} contains a line break")
    lines = (text or "").splitlines()
    out: list[str] = []
    pending = {k.lower(): (k, v) for k, v in options.items()}
    current: str | None = None
    seen_section = False

    def flush_missing() -> None:
        # Append the options the section did not have yet, before any trailing blank lines.
        trailing = []
        while out and not out[-1].strip():
            trailing.append(out.pop())
        for key, value in list(pending.values()):
            if value is not None:
                out.append(f"{key} = {_render(value)}")
        pending.clear()
        out.extend(trailing)

    for line in lines:
        header = _SECTION.match(line)
        if header:
            if current == section:
                flush_missing()
            current = header.group("name").strip()
            seen_section = seen_section or current == section
            out.append(line)
            continue
        option = _OPTION.match(line)
        if current == section and option and option.group("key").lower() in pending:
            key, value = pending.pop(option.group("key").lower())
            if value is not None:
                out.append(f"{key} = {_render(value)}")
            continue
        if current == section and option and option.group("key").lower() in {k.lower() for k in options}:
            continue  # a duplicate of an option already set above: drop it
        out.append(line)
    if current == section:
        flush_missing()
    if not seen_section:
        if out and out[-1].strip():
            out.append("")
        out.append(f"[{section}]")
        flush_missing()
    return "\n".join(out) + "\n"
