"""Names from the user's data shown as plain text, wherever the dashboard draws them.

Numbers for people have one rule too, `people_number`: the decimals that give the view's
width scale three significant figures, for every width and part shown (bar labels, hovers, the
reading, tables, the queue).

Column names, patient ids, feature names and file names come from uploaded files. Two
renderers would read them as markup: Streamlit's Markdown (titles, captions, message boxes,
widget labels, tooltips) and plotly's HTML subset (axis labels, hover text, titles). Every page
and chart passes such names through one of the two functions here; free text typed by users
(review notes) goes to `st.text`, which renders nothing.
"""

from __future__ import annotations

import math
import re
import string

MARKDOWN_SPECIALS = re.compile("([" + re.escape(string.punctuation) + "])")
"""CommonMark lets a backslash escape any ASCII punctuation; escaping all of it also breaks
GFM's bare-link detection (`www.x.org`, `http://`, `a@b.org` need their `.`, `:` or `@`) and
Streamlit's `:emoji:`, `:color[...]` and `$math$` extensions."""

LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")

WORD_JOINER = "\u2060"
LINK_STARTS = re.compile(r"(?i)(?<![a-z0-9])(www|https?|mailto|xmpp)(?=[.:])|(@)")
"""Streamlit finds bare links (`www.x.org`, `http://x`, `a@b.org`) in the text after the
escapes are read, so escaping alone leaves them clickable; an invisible word joiner where each
such pattern starts (`www⁠.`, `http⁠:`, `⁠@`) breaks it and shows the same characters."""


def _joined(match: re.Match[str]) -> str:
    return (match.group(1) + WORD_JOINER) if match.group(1) else (WORD_JOINER + "@")


def markdown_text(text: object) -> str:
    """`text` for an element that renders Markdown: shown as written, never as a link, an
    image, a heading or a format. Line breaks become spaces (a new line could start a list)."""
    plain = LINE_BREAKS.sub(" ", str(text)).replace(WORD_JOINER, "")
    return MARKDOWN_SPECIALS.sub(r"\\\1", LINK_STARTS.sub(_joined, plain))


PLOTLY_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def plotly_text(text: object) -> str:
    """`text` for a plotly label, title or hover text: plotly renders `<a href>`, `<b>`, `<br>`
    and `<span style>` in them, and decodes entities; as `&lt;` and `&amp;` they show as
    written."""
    return "".join(PLOTLY_ENTITIES.get(c, c) for c in str(text))


def plotly_labels(texts: object) -> list[str]:
    """Many names for plotly (axis categories, box names)."""
    return [plotly_text(t) for t in texts]  # type: ignore[attr-defined]


SAFE_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def file_name_part(text: object, limit: int = 60) -> str:
    """A patient id inside a download's file name: letters, digits, `._-` only."""
    return SAFE_FILE_NAME.sub("_", str(text)).strip("._")[:limit] or "case"


SIGNIFICANT = 3
"""Significant figures of the width scale that every width and part on show keeps."""
MINUS = "−"
NEAR_ZERO = "≈0"
"""A value that is not zero but rounds to it at the scale's decimals."""


def decimals_for(scale: float) -> int:
    """Decimals that give `scale` three significant figures (none from 100 up): 262 → 0,
    26.4 → 1, 0.053 → 4."""
    scale = abs(float(scale))
    if not math.isfinite(scale) or scale == 0:
        return SIGNIFICANT - 1
    return max(0, SIGNIFICANT - 1 - math.floor(math.log10(scale)))


def people_number(value: float, scale: float | None = None, signed: bool = False) -> str:
    """`value` rounded for people, at the decimals that give `scale` (the view's width scale:
    the featureless width, or the largest number of a chart) three significant figures; by
    default the value's own three. Never e-notation; thousands grouped; a true minus sign.

    One scale per view keeps its numbers comparable: with widths near 262, +20.8 and +0.681
    read +21 and +1; a non-zero value that rounds to nothing reads ≈0."""
    number = float(value)
    if not math.isfinite(number):
        return "n/a"
    decimals = decimals_for(number if scale is None else scale)
    rounded = round(abs(number), decimals)
    if rounded == 0:
        return "0" if number == 0 else NEAR_ZERO
    text = f"{rounded:,.{decimals}f}"
    if number < 0:
        return MINUS + text
    return "+" + text if signed else text


def table_format(scale: float) -> str:
    """The printf format of a table's width and part columns under the same rule."""
    return f"%.{decimals_for(scale)}f"
