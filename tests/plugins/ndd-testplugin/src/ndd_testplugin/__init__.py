"""A test plugin: declares ``ndd.testplugin.scale`` with a CPU kernel."""

from __future__ import annotations

from ndd.plugins import Arg, OpSchema, Registry

SCALE = OpSchema(
    "testplugin.scale",
    args={"factor": Arg("float", default=2.0, per_sample=True)},
    doc="Multiply every element by ``factor`` (test plugin).",
)


def _scale_cpu(ctx, inputs, args):
    bd = inputs[0]
    return [s * args.sample("factor", i) for i, s in enumerate(bd.samples)]


def register(reg: Registry) -> None:
    reg.add_schema(SCALE)
    reg.add_kernel("testplugin.scale", "cpu", _scale_cpu)
