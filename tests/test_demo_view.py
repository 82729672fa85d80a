"""The demo's live view, without a broker."""

from __future__ import annotations


def test_the_demo_live_view_fits_the_terminal_height():
    from streamguard.demo import fit_to_height

    lines = [f"line {i}" for i in range(40)]
    fitted = fit_to_height(lines, 24)
    assert len(fitted) == 23
    assert fitted[:21] == lines[:21] and fitted[-1] == lines[-1]
    assert fitted[21] == "… 18 more lines (a taller terminal shows them)"
    assert fit_to_height(lines[:10], 24) == lines[:10]
    assert len(fit_to_height(lines, 2)) == 3  # never less than head, note and last line
