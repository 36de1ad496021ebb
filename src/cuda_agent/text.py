"""Text cut to a size for its reader (a model's context, a log, a table cell), saying how much was cut."""

from __future__ import annotations

KEEPS = ("ends", "tail", "head")


def clip(text: str, limit: int, keep: str = "ends") -> str:
    """`text` itself where it has at most `limit` characters; else `limit` of them with a mark of
    how many were dropped: the head and the tail (`ends`: a command's output, whose start and end
    both matter), the tail (`tail`: a compiler's or a program's last words), or the head (`head`)."""
    if len(text) <= limit:
        return text
    mark = f"[... {len(text) - limit} characters dropped ...]"
    if keep == "head":
        return f"{text[:limit]} {mark}"
    if keep == "tail":
        return f"{mark}\n{text[len(text) - limit:]}"
    if keep != "ends":
        raise ValueError(f"keep={keep!r}: use one of {', '.join(KEEPS)}")
    head = limit // 2
    return f"{text[:head]}\n{mark}\n{text[len(text) - (limit - head):]}"
