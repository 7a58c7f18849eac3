"""User code in a second file, for the cross-file source-analysis tests."""

import sys

from ndd_capture._source_analysis import CallAnalysis, analyze_call


class Seen:
    """The proofs of one fake operator call, computed while the caller frame still runs."""

    def __init__(self, analysis: CallAnalysis, nargs: int, names: list[str]) -> None:
        self.analysis = analysis
        self.args = [analysis.positional(i) for i in range(nargs)]
        self.kw = {name: analysis.keyword(name) for name in names}


def op(*args, **kwargs):
    """A fake ndd operator: analyses the call that invoked it."""
    frame = sys._getframe(1)
    return Seen(analyze_call(frame, frame.f_lasti), len(args), list(kwargs))


def build(images, angle):
    return op(images, angle=angle)


def build_default(images, angle=45):
    return op(images, angle=angle)


def call_back(fn):
    return fn(1, 30)
