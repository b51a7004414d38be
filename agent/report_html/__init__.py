"""The static HTML report of runs (`aka report`): data (audit -> RunReport), charts (matplotlib SVG), render."""
