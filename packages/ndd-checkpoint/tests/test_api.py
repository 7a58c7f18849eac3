"""DALI parity of ``Checkpoint``: every method, flag and error (type and message)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import ndd
from ndd.checkpoint import Checkpoint, current
from ndd.random import RNG, RNGState


def file_reader(root: str, **kw) -> ndd.readers.File:
    return ndd.readers.File(file_root=root, **kw)


def labels_of(reader, steps: int, batch_size: int = 2) -> list[list[int]]:
    out = []
    while len(out) < steps:
        for _, labels in reader.next_epoch(batch_size=batch_size):
            out.append(np.array(ndd.as_tensor(labels)).ravel().tolist())
            if len(out) == steps:
                break
    return out


# -- register ----------------------------------------------------------------------------
def test_anonymous_keys_count_registered_ops():
    ck = Checkpoint()
    a, b, c = RNG(0), RNG(1), RNG(2)
    assert ck.register(a) == "__op_0"
    assert ck.register(b, "named") == "named"
    assert ck.register(c) == "__op_2"
    assert ck.names == ("__op_0", "named", "__op_2")
    assert len(ck) == 3 and "named" in ck and "__op_0" in ck and "other" not in ck


def test_after_named_entry_next_anonymous_key_is_op_1():
    ck = Checkpoint()
    ck.register(RNG(0), "rng")
    assert ck.register(RNG(1)) == "__op_1"


def test_reregister_is_idempotent():
    ck = Checkpoint()
    a, b = RNG(0), RNG(1)
    assert ck.register(a) == ck.register(a) == "__op_0"
    assert ck.register(b, "b") == ck.register(b, "b") == "b"
    assert ck.register(b) == "b"  # anonymous re-registration returns the existing key
    assert len(ck) == 2


@pytest.mark.parametrize("name, message", [
    ("__op_0", "Manually assigned names must not start with '__op_'."),
    ("__op_x", "Manually assigned names must not start with '__op_'."),
    ("", "The name must not be empty."),
])
def test_reserved_and_empty_names(name, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Checkpoint().register(RNG(0), name)


def test_same_object_under_a_second_name():
    ck = Checkpoint()
    rng = RNG(0)
    ck.register(rng, "a")
    with pytest.raises(RuntimeError, match=re.escape(
            "Cannot register the operator with a new key 'b' when it's already been added with the key 'a'.")):
        ck.register(rng, "b")


def test_replace_same_type_and_type_check(jpeg_root):
    ck = Checkpoint()
    old, new = RNG(0), RNG(1)
    ck.register(old, "k")
    assert ck.register(new, "k") == "k"
    assert ck.names == ("k",)
    assert ck.register(old, "k2") == "k2"  # the replaced op is free again
    with pytest.raises(TypeError, match=re.escape(
            "Cannot replace operator 'k' of type 'RNG' with an operator of type 'File'.")):
        ck.register(file_reader(jpeg_root), "k")


def test_register_rejects_stateless_objects():
    with pytest.raises(TypeError, match="no `get_state`/`set_state`"):
        Checkpoint().register(object(), "x")


def test_registering_a_reader_enables_checkpointing(jpeg_root):
    reader = file_reader(jpeg_root)
    assert not reader._checkpointing
    Checkpoint().register(reader, "r")
    assert reader._checkpointing


def test_registering_an_iterated_reader_works(jpeg_root):
    """Beyond DALI (RuntimeError there): registration is allowed at any step boundary."""
    reference = labels_of(file_reader(jpeg_root), 6)
    reader = file_reader(jpeg_root)  # checkpointing off
    first = labels_of(reader, 2)
    ck = Checkpoint()
    ck.register(reader, "r")
    ck.collect()
    fresh = file_reader(jpeg_root)
    restored = Checkpoint()
    restored.deserialize(ck.serialize())
    restored.register(fresh, "r")
    assert first + labels_of(fresh, 4) == reference


def test_register_new_op_after_collect():
    ck = Checkpoint()
    rng = RNG(0)
    ck.register(rng, "rng")
    ck.collect()
    with pytest.raises(RuntimeError, match=re.escape(
            "Cannot register a new operator into a checkpoint that has been completed via `collect`. "
            "Call `clear` first.")):
        ck.register(RNG(1))
    with pytest.raises(RuntimeError, match=re.escape(
            "Cannot register a new op 'x' into a completed checkpoint. Call `clear` first.")):
        ck.register(RNG(1), "x")
    assert ck.register(rng, "rng") == "rng" and ck.register(rng) == "rng"
    ck.clear()
    assert ck.register(RNG(1), "x") == "x"


def loaded(states: dict) -> Checkpoint:
    ck = Checkpoint()
    ck.deserialize(json.dumps({"version": 2, "states": states}))
    return ck


def test_register_after_load_requires_the_key():
    state = str(RNG(5).get_state())
    ck = loaded({"rng": {"state": state, "type": "RNG"}})
    with pytest.raises(KeyError, match=re.escape("Checkpoint was loaded but does not contain a state for 'other'.")):
        ck.register(RNG(0), "other")
    with pytest.raises(KeyError, match=re.escape("Loaded checkpoint has no state for the operator's key '__op_0'.")):
        ck.register(RNG(0))
    assert len(ck) == 0


def test_loaded_state_is_applied_at_register():
    source = RNG(5)
    source(), source()
    ck = loaded({"rng": {"state": str(source.get_state()), "type": "RNG"}})
    rng = RNG(0)
    ck.register(rng, "rng")
    assert rng.get_state() == source.get_state()
    assert rng() == source()
    rng()
    ck.register(rng, "rng")  # applied once: re-registering does not rewind
    assert rng.get_state() != ck.get_state("rng")


def test_loaded_state_type_mismatch(jpeg_root):
    reader = file_reader(jpeg_root, enable_checkpointing=True)
    labels_of(reader, 1)
    ck = loaded({"x": {"state": str(reader.get_state()), "type": "File"}})
    with pytest.raises(TypeError, match=re.escape(
            "Type mismatch for operator 'x': checkpoint stores state for type 'File', "
            "but the registered operator is of type 'RNG'.")):
        ck.register(RNG(0), "x")
    assert "x" not in ck  # a failed registration leaves nothing behind
    fresh = file_reader(jpeg_root)
    ck.register(fresh, "x")
    assert fresh.get_state() == reader.get_state()


def test_anonymous_loaded_states_follow_registration_order():
    a, b = RNG(1), RNG(2)
    ck = Checkpoint()
    ck.register(a), ck.register(b)
    ck.collect()
    ck2 = Checkpoint()
    ck2.deserialize(ck.serialize())
    x, y = RNG(9), RNG(9)
    assert (ck2.register(x), ck2.register(y)) == ("__op_0", "__op_1")
    assert (x.get_state(), y.get_state()) == (a.get_state(), b.get_state())


# -- collect / restore -------------------------------------------------------------------
def test_collect_flags_and_states():
    ck = Checkpoint()
    rng = RNG(3)
    ck.register(rng, "rng")
    assert ck.get_state("rng") is None
    assert not ck.is_complete and not ck.is_loaded
    ck.collect()
    assert ck.is_complete and not ck.is_loaded
    state = ck.get_state("rng")
    assert isinstance(state, RNGState) and state == rng.get_state()
    ck.deserialize(ck.serialize())
    assert ck.is_loaded and not ck.is_complete
    assert ck.get_state("rng") == str(state) and isinstance(ck.get_state("rng"), str)
    ck.collect()
    assert ck.is_complete and not ck.is_loaded


def test_collect_with_unregistered_states():
    ck = Checkpoint()
    ck.register(RNG(0), "rng")
    ck.set_state("ghost", "x")
    with pytest.raises(RuntimeError, match=re.escape(
            "Checkpoint state has entries with no corresponding registered ops: ['ghost'].")):
        ck.collect()


def test_collect_before_first_iteration_raises(jpeg_root):
    ck = Checkpoint()
    ck.register(file_reader(jpeg_root), "r")
    with pytest.raises(RuntimeError, match="before its first iteration"):
        ck.collect()


def test_restore():
    ck = Checkpoint()
    ck.restore()  # no states: nothing to do
    rng, other = RNG(1), RNG(2)
    ck.register(rng, "rng")
    ck.collect()
    saved = rng.get_state()
    rng(), rng()
    ck.restore()  # collected states are clean: nothing applied
    assert rng.get_state() != saved
    ck.set_state("rng", saved)
    ck.restore()
    assert rng.get_state() == saved

    ck.clear()
    ck.register(rng, "rng")
    ck.set_state("rng", saved)
    ck.set_state("ghost", saved)
    with pytest.raises(RuntimeError, match=re.escape(
            "Checkpoint state has entries with no corresponding registered ops: ['ghost'].")):
        ck.restore()
    ck.clear()
    ck.register(rng, "rng")
    ck.register(other, "other")
    ck.set_state("rng", saved)
    with pytest.raises(RuntimeError, match=re.escape(
            "Checkpoint state is incomplete - missing entries for ['other'].")):
        ck.restore()


# -- get_state / set_state -----------------------------------------------------------------
def test_get_state_unregistered():
    with pytest.raises(KeyError, match=re.escape("No op registered under 'nope'.")):
        Checkpoint().get_state("nope")


def test_set_state_op_type_forms():
    rng = RNG(1)
    state = rng.get_state()
    for op_type in (RNG, "RNG", None):
        ck = Checkpoint()
        ck.set_state("rng", state, op_type=op_type)
        target = RNG(0)
        ck.register(target, "rng")
        assert target.get_state() == state
    with pytest.raises(TypeError, match=re.escape("`op_type` must be a class or a string, got 3.")):
        Checkpoint().set_state("rng", state, op_type=3)
    ck = Checkpoint()
    ck.set_state("rng", state, op_type="File")
    with pytest.raises(TypeError, match="Type mismatch for operator 'rng'"):
        ck.register(RNG(0), "rng")


def test_set_state_on_complete_checkpoint():
    ck = Checkpoint()
    rng = RNG(1)
    ck.register(rng, "rng")
    ck.collect()
    with pytest.raises(KeyError, match=re.escape("No operator registered under 'other'.")):
        ck.set_state("other", "x")
    ck.set_state("rng", RNG(7).get_state())  # a registered name is fine
    ck.restore()
    assert rng.get_state() == RNG(7).get_state()


# -- serialize / clear / current ---------------------------------------------------------------
def test_serialize_format():
    ck = Checkpoint()
    rng = RNG(1)
    ck.register(rng, "rng")
    with pytest.raises(RuntimeError, match=re.escape(
            "Cannot serialize an empty checkpoint. Call `collect` (or `set_state`) first.")):
        ck.serialize()
    ck.collect()
    assert json.loads(ck.serialize()) == {
        "version": 2, "states": {"rng": {"state": str(rng.get_state()), "type": "RNG"}}}
    ck.clear()
    ck.set_state("x", "abc")
    assert json.loads(ck.serialize()) == {"version": 2, "states": {"x": {"state": "abc", "type": None}}}


def test_clear():
    ck = Checkpoint()
    ck.register(RNG(0), "a")
    ck.collect()
    ck.clear()
    assert (len(ck), ck.names, ck.is_complete, ck.is_loaded) == (0, (), False, False)
    assert ck.register(RNG(0)) == "__op_0"


def test_current_is_bound_to_the_eval_context():
    assert current() is current() is ndd.EvalContext.current().checkpoint
    assert isinstance(current(), Checkpoint)
    with ndd.EvalContext() as ctx:
        assert current() is ctx.checkpoint is not ndd.EvalContext.default().checkpoint
    assert current() is ndd.EvalContext.default().checkpoint


# -- a mixed round trip ---------------------------------------------------------------------
def test_reader_and_rng_round_trip(jpeg_root):
    reader = file_reader(jpeg_root, enable_checkpointing=True, random_shuffle=True, seed=3)
    rng = RNG(42)
    ck = Checkpoint()
    ck.register(reader, "reader")
    ck.register(rng, "rng")
    labels_of(reader, 2)
    rng(), rng()
    ck.collect()
    data = ck.serialize()
    expected_labels, expected_draw = labels_of(reader, 3), rng()

    reader2, rng2 = file_reader(jpeg_root, random_shuffle=True, seed=3), RNG()
    ck2 = Checkpoint()
    ck2.deserialize(data)
    ck2.register(reader2, "reader")
    ck2.register(rng2, "rng")
    assert labels_of(reader2, 3) == expected_labels
    assert rng2() == expected_draw
