"""Random loop bodies of the operators a device graph takes, in capture mode.

Each seed writes the source of a body: a GPU decode, then three to seven operators drawn
from :data:`OPS` with random arguments (per-sample random values among them), an ending
(a layout change, a join or a cast) and sometimes a reduction and one-hot labels. The body
runs eagerly and captured, its GPU part replayed as one device graph: the results must be
identical, every call captured and the whole GPU part in the graph. The generated source is
in the failure message. On the CPU emulation a replay runs the captured device pass again on
the captured step's values and the new step's input arrays, so a kernel that read a per-step
value outside its arrays would give the captured step's results and fail here.
"""

from __future__ import annotations

import linecache
import os
import random
import sys
from collections.abc import Callable

import pytest

import ndd
import ndd.types as types

pytest.importorskip("ndd_capture", reason="needs the ndd-capture package")
pytest.importorskip("ndd_readers.writers", reason="needs the ndd-readers package")

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from capture_helpers import B, assert_same, eager_run, graphed_run, noisy_digits_lmdb  # noqa: E402

# Eight seeds in a row, and four that with them use every operator and ending (found by search)
SEEDS = (0, 1, 2, 3, 4, 5, 6, 7, 92, 103, 433, 1086)


def _u(lo: float, hi: float, shape: list[int] | None = None) -> str:
    extra = f", shape={shape}" if shape is not None else ""
    return f"ndd.random.uniform(batch_size=B, range=[{lo}, {hi}]{extra}, rng=rng)"


COIN = "ndd.random.coin_flip(batch_size=B, probability=0.5, rng=rng)"

# name -> (when it applies to the state, its line and state changes); the state is the
# images' size (h, w), channels (ch) and type (dt: "u8" or "f32") before the call.
Op = Callable[[random.Random, dict], tuple[str, dict]]


def _crop_size(r: random.Random, s: dict) -> tuple[int, int]:
    return r.randint(8, s["h"] - 2), r.randint(8, s["w"] - 2)


def _crop(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = _crop_size(r, s)
    return f"x = ndd.crop(x, crop=({h}, {w}), crop_pos_x={_u(0.0, 1.0)}, crop_pos_y={_u(0.0, 1.0)})", dict(h=h, w=w)


def _crop_fixed(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = _crop_size(r, s)
    return f"x = ndd.crop(x, crop=({h}, {w}), crop_pos_x=0.3, crop_pos_y=0.6)", dict(h=h, w=w)


def _cmn(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = _crop_size(r, s)
    ch = s["ch"]
    return (f"x = ndd.crop_mirror_normalize(x, crop=({h}, {w}), crop_pos_x={_u(0.0, 1.0)}, mirror={COIN}, "
            f"mean={[30.0] * ch}, std={[60.0] * ch}, dtype=ndd.float32, output_layout='HWC')",
            dict(h=h, w=w, dt="f32"))


def _resize(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = r.randint(16, 40), r.randint(16, 40)
    interp = r.choice(["INTERP_LINEAR", "INTERP_CUBIC", "INTERP_NN", "INTERP_LANCZOS3", "INTERP_TRIANGULAR"])
    return (f"x = ndd.resize(x, size=({h}, {w}), interp_type=types.{interp}, antialias={r.choice([True, False])})",
            dict(h=h, w=w))


def _random_resized_crop(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = r.randint(12, 36), r.randint(12, 36)
    interp = r.choice(["INTERP_LINEAR", "INTERP_CUBIC", "INTERP_NN", "INTERP_LANCZOS3"])
    return (f"x = ndd.random_resized_crop(x, size=({h}, {w}), interp_type=types.{interp}, "
            f"antialias={r.choice([True, False])}, rng=rng)", dict(h=h, w=w))


def _pad(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = s["h"] + r.randint(0, 5), s["w"] + r.randint(0, 5)
    return f"x = ndd.pad(x, axis_names='HW', shape=({h}, {w}), fill_value=3)", dict(h=h, w=w)


def _rotate_to_size(r: random.Random, s: dict) -> tuple[str, dict]:
    h, w = s["h"] + 2, s["w"] - 2
    return f"x = ndd.rotate(x, angle={_u(-10.0, 10.0)}, size=({h}, {w}), fill_value=0)", dict(h=h, w=w)


def _any(s: dict) -> bool:
    return True


def _u8(s: dict) -> bool:
    return s["dt"] == "u8"


def _u8_rgb(s: dict) -> bool:
    return s["dt"] == "u8" and s["ch"] == 3


def _croppable(s: dict) -> bool:
    return s["h"] > 12 and s["w"] > 12


OPS: dict[str, tuple[Callable[[dict], bool], Op]] = {
    "rotate": (_any, lambda r, s: (
        f"x = ndd.rotate(x, angle={_u(-20.0, 20.0)}, keep_size=True, fill_value={r.choice([0, 7])})", {})),
    "rotate to a size": (_any, _rotate_to_size),
    "warp_affine": (_any, lambda r, s: (f"x = ndd.warp_affine(x, {_u(0.6, 1.0, [2, 3])}, fill_value=0)", {})),
    "warp_affine to a size": (_any, lambda r, s: (
        f"x = ndd.warp_affine(x, {_u(0.6, 1.0, [2, 3])}, size=(20, 30), fill_value=5)", dict(h=20, w=30))),
    "warp_affine, constant": (_any, lambda r, s: (
        f"x = ndd.warp_affine(x, matrix=[0.9, 0.1, 1.0, -0.1, 0.95, 2.0], inverse_map={r.choice([True, False])})",
        {})),
    "flip": (_any, lambda r, s: (f"x = ndd.flip(x, horizontal={COIN}, vertical={r.choice([0, 1])})", {})),
    "flip, constant": (_any, lambda r, s: ("x = ndd.flip(x, horizontal=1)", {})),
    "crop": (_croppable, _crop),
    "crop, fixed": (_croppable, _crop_fixed),
    "crop_mirror_normalize": (_croppable, _cmn),
    "slice": (_croppable, lambda r, s: (
        f"x = ndd.slice(x, {_u(0.0, 0.4, [2])}, [{s['h'] // 2}, {s['w'] // 2}], axis_names='HW', "
        "normalized_shape=False)", dict(h=s["h"] // 2, w=s["w"] // 2))),
    "slice, padded": (_croppable, lambda r, s: (
        f"x = ndd.slice(x, {_u(-0.3, 0.8, [2])}, [{s['h'] - 4}, {s['w'] - 4}], axis_names='HW', "
        f"normalized_shape=False, out_of_bounds_policy='pad', fill_values={r.choice([7, [9.0] * s['ch']])})",
        dict(h=s["h"] - 4, w=s["w"] - 4))),
    "normalize": (_any, lambda r, s: ("x = ndd.normalize(x, mean=40.0, stddev=70.0, shift=1.0)", dict(dt="f32"))),
    "normalize, computed": (_any, lambda r, s: ("x = ndd.normalize(x, axes=(0, 1), scale=2.0)", dict(dt="f32"))),
    "normalize, random mean": (_any, lambda r, s: (
        f"x = ndd.normalize(x, mean={_u(20.0, 60.0)}, stddev=64.0)", dict(dt="f32"))),
    "resize": (_any, _resize),
    "random_resized_crop": (_any, _random_resized_crop),
    "resize_shorter": (_any, lambda r, s: ("x = ndd.resize(x, resize_shorter=24)", dict(h=24, w=24))),
    "gaussian_blur": (_any, lambda r, s: (f"x = ndd.gaussian_blur(x, sigma={r.choice([0.6, 1.2, 2.0])})", {})),
    "gaussian_blur, window": (_any, lambda r, s: (
        f"x = ndd.gaussian_blur(x, window_size={r.choice([3, 5])})", {})),
    "gaussian_blur, random sigma": (_any, lambda r, s: (f"x = ndd.gaussian_blur(x, sigma={_u(0.1, 2.0)})", {})),
    "brightness_contrast": (_any, lambda r, s: (
        f"x = ndd.brightness_contrast(x, brightness={_u(0.7, 1.3)}, contrast={r.choice([0.8, 1.1])})", {})),
    "brightness_contrast to float": (_any, lambda r, s: (
        f"x = ndd.brightness_contrast(x, brightness={_u(0.7, 1.3)}, contrast_center=100.0, dtype=ndd.float32)",
        dict(dt="f32"))),
    "noise.gaussian": (_any, lambda r, s: (
        f"x = ndd.noise.gaussian(x, stddev={r.choice([3.0, 10.0])}, rng=rng)", {})),
    "noise.salt_and_pepper": (_any, lambda r, s: (
        f"x = ndd.noise.salt_and_pepper(x, prob={_u(0.0, 0.2)}, rng=rng)", {})),
    "noise.shot": (_any, lambda r, s: (
        f"x = ndd.noise.shot(x, factor={r.choice(['2.0', _u(0.5, 20.0)])}, rng=rng)", {})),
    "erase": (_any, lambda r, s: (
        f"x = ndd.erase(x, anchor={_u(0.0, 0.7, [2])}, shape=[0.3, 0.2], normalized=True, axis_names='HW', "
        f"fill_value={r.choice([0, 99])})", {})),
    "pad": (_any, _pad),
    "cast to uint8": (lambda s: s["dt"] != "u8", lambda r, s: ("x = ndd.cast(x, dtype=ndd.uint8)", dict(dt="u8"))),
    "cast to float": (_u8, lambda r, s: ("x = ndd.cast(x, dtype=ndd.float32)", dict(dt="f32"))),
    "lookup_table": (_u8, lambda r, s: (
        "x = ndd.lookup_table(x, keys=[0, 128, 255], values=[255.0, 127.0, 0.0], default_value=64.0, "
        "dtype=ndd.float32)", dict(dt="f32"))),
    "hsv": (_u8_rgb, lambda r, s: (f"x = ndd.hsv(x, hue={_u(-30.0, 30.0)}, saturation=1.2)", {})),
    "color_twist": (_u8_rgb, lambda r, s: (
        f"x = ndd.color_twist(x, saturation={_u(0.5, 1.5)}, contrast=0.9, hue=10.0)", {})),
    "color_space_conversion": (_u8_rgb, lambda r, s: (
        "x = ndd.color_space_conversion(x, image_type=types.RGB, output_type=types.BGR)", {})),
    "color_space_conversion to gray": (_u8_rgb, lambda r, s: (
        "x = ndd.color_space_conversion(x, image_type=types.RGB, output_type=types.GRAY)", dict(ch=1))),
}

ENDINGS = {
    "": "",
    "crop_mirror_normalize to CHW": "x = ndd.crop_mirror_normalize(x, mirror={coin}, mean={mean}, std={std}, "
                                    "output_layout='CHW')",
    "transpose": "x = ndd.transpose(x, perm=[2, 0, 1])",
    "cat": "x = ndd.cat(x, ndd.flip(x, vertical=1), axis=0)",
    "stack": "x = ndd.stack(x, x, axis=1)",
    "reshape": "x = ndd.reshape(x, shape=[-1])",
    "cast to float16": "x = ndd.cast(x, dtype=ndd.float16)",  # (the noise ops and reductions take no float16)
}


def make_body(seed: int) -> tuple[str, list[str]]:
    """The source of body ``seed`` and the names of its operators (in :data:`OPS` and
    :data:`ENDINGS`)."""
    r = random.Random(seed)
    rgb = r.random() < 0.5
    state = {"ch": 3 if rgb else 1, "dt": "u8", "h": 28, "w": 28}
    lines = [f"x = ndd.decoders.image(jpegs, device='gpu', output_type=types.{'RGB' if rgb else 'GRAY'})"]
    names = []
    for _ in range(r.randint(3, 7)):
        name = r.choice([n for n, (ok, _) in OPS.items() if ok(state)])
        line, changes = OPS[name][1](r, state)
        state.update(changes)
        lines.append(line)
        names.append(name)
    end = r.choice([e for e in ENDINGS if e != "crop_mirror_normalize to CHW" or state["dt"] == "u8"])
    if end:
        ch = state["ch"]
        lines.append(ENDINGS[end].format(coin=COIN, mean=[30.0] * ch, std=[60.0] * ch))
        names.append(end)
    outs = ["x.torch()"]
    if r.random() < 0.5 and end in ("", "crop_mirror_normalize to CHW", "cat"):
        lines.append("m = ndd.reductions.mean(x, axis_names='HW')")
        outs.append("m.torch()")
        names.append("reductions.mean")
    if r.random() < 0.5:
        lines.append("hot = ndd.one_hot(ndd.squeeze(labels.gpu(), axes=0), num_classes=10, dtype=ndd.float32)")
        outs.append("hot.torch()")
        names.append("one_hot")
    lines.append(f"return ({', '.join(outs)},)")
    return "def body(jpegs, labels, rng):\n" + "".join(f"    {line}\n" for line in lines), names


def compile_body(seed: int) -> tuple[Callable, str]:
    src, _ = make_body(seed)
    name = f"<random body {seed}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)  # tracebacks show the line
    scope = {"ndd": ndd, "types": types, "B": B}
    exec(compile(src, name, "exec"), scope)
    return scope["body"], src


@pytest.fixture(scope="module")
def colour_digits(tmp_path_factory) -> str:
    return noisy_digits_lmdb(tmp_path_factory.mktemp("colour_digits"), colour=True)


def test_the_seeds_cover_every_operator_and_ending():
    used = {name for seed in SEEDS for name in make_body(seed)[1]}
    assert set(OPS) | set(ENDINGS) - {""} | {"reductions.mean", "one_hot"} <= used, sorted(used)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_body_replays_from_one_graph_with_eager_results(colour_digits, seed):
    body, src = compile_body(seed)
    eager = eager_run(colour_digits, body)
    captured = graphed_run(colour_digits, body)
    report = ndd.capture.report()
    try:
        assert_same(eager, captured)
    except AssertionError as e:
        raise AssertionError(f"captured results differ from eager ones for\n{src}\n{e}") from None
    assert not report.fallbacks, f"{src}\n{report}"
    assert report.worker.endswith("; the GPU part replayed as one device graph"), f"{src}\n{report.worker}"
    assert captured[2].stats.replayed >= 8, f"{src}\n{captured[2].stats}"


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_a_random_body_in_graphs_of_three_steps(colour_digits, seed):
    """The same, with ``ndd.capture.set_graph_steps(3)``: each replay computes three steps."""
    body, src = compile_body(seed)
    eager = eager_run(colour_digits, body)
    ndd.capture.set_graph_steps(3)
    try:
        captured = graphed_run(colour_digits, body)
    finally:
        ndd.capture.set_graph_steps(1)
    try:
        assert_same(eager, captured)
    except AssertionError as e:
        raise AssertionError(f"captured results differ from eager ones for\n{src}\n{e}") from None
    assert ndd.capture.report().worker.endswith(", 3 steps a replay"), f"{src}\n{ndd.capture.report().worker}"
    assert captured[2].steps == 3 and captured[2].stats.replayed >= 8, f"{src}\n{captured[2].stats}"
