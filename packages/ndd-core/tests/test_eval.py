"""EvalMode, EvalContext, the background executor and error propagation."""

import threading
import time
import traceback

import numpy as np
import pytest

import ndd
from ndd.plugins import Arg, OpSchema, Registry, schemas

# A test-only op whose kernel records when it runs and can fail or block.
_runs: list = []
_gate = threading.Event()
PROBE = OpSchema("_test_probe", args={"fail": Arg("bool", default=False),
                                      "wait": Arg("bool", default=False),
                                      "tag": Arg("int", default=0)}, internal=True)


def _probe_kernel(ctx, inputs, args):
    if args["wait"]:
        assert _gate.wait(5)
    _runs.append((args["tag"], threading.current_thread().name))
    if args["fail"]:
        raise KeyError("probe failed on purpose")
    return inputs[0].dense + 1


if "_test_probe" not in schemas():
    reg = Registry("tests")
    reg.add_schema(PROBE)
    reg.add_kernel("_test_probe", "cpu", _probe_kernel)


def probe(x, **kw):
    from ndd._dispatch import call

    return call(PROBE, (x,), kw)


@pytest.fixture(autouse=True)
def _reset():
    _runs.clear()
    _gate.set()
    yield
    _gate.set()


def test_ordering_and_alias():
    E = ndd.EvalMode
    assert E.deferred < E.eager < E.sync_cpu < E.sync_full
    assert E.default is E.eager
    assert E.current() is E.eager
    with E.sync_cpu:
        assert E.current() is E.sync_cpu
        with E.deferred:
            assert E.current() is E.deferred
        assert E.current() is E.sync_cpu
    assert E.current() is E.eager


def test_mode_stack_is_thread_local():
    seen = []
    with ndd.EvalMode.deferred:
        t = threading.Thread(target=lambda: seen.append(ndd.EvalMode.current()))
        t.start()
        t.join()
    assert seen == [ndd.EvalMode.eager]


def _own(x):
    # A tensor made by ndd (not wrapping user memory), so calls on it are not forced sync.
    return ndd.tensor(x)


def test_eager_runs_in_background_in_order():
    _gate.clear()
    x = _own(np.zeros(2, np.int32))
    a = probe(x, wait=True, tag=1)
    b = probe(x, tag=2)
    assert a.dtype == ndd.int32 and a.ndim == 1  # metadata without running
    assert _runs == []  # still blocked behind the gate
    _gate.set()
    assert np.asarray(b).tolist() == [1, 1]
    assert [r[0] for r in _runs] == [1, 2]
    assert all(r[1] == "ndd-executor" for r in _runs)


def test_deferred_runs_only_when_needed():
    x = _own(np.zeros(2, np.int32))
    with ndd.EvalMode.deferred:
        y = probe(x, tag=1)
        probe(x, tag=2)  # never read
        time.sleep(0.05)
        assert _runs == []
        assert y.ndim == 1 and y.dtype == ndd.int32
        np.asarray(y)
    assert [r[0] for r in _runs] == [1]
    assert _runs[0][1] == threading.current_thread().name


@pytest.mark.parametrize("mode", [ndd.EvalMode.sync_cpu, ndd.EvalMode.sync_full])
def test_sync_runs_at_call_in_caller(mode):
    x = _own(np.zeros(2, np.int32))
    with mode:
        probe(x, tag=7)
        assert _runs == [(7, threading.current_thread().name)]
        with pytest.raises(KeyError, match="on purpose") as info:
            probe(x, fail=True)
        assert info.value.__cause__ is None


def test_wrapping_user_memory_runs_at_once():
    a = np.zeros(2, np.int32)
    with ndd.EvalMode.deferred:
        probe(ndd.as_tensor(a), tag=3)
        assert [r[0] for r in _runs] == [3]


@pytest.mark.parametrize("mode,message", [
    (ndd.EvalMode.eager, "An error happened during asynchronous execution"),
    (ndd.EvalMode.deferred, "An error happened during deferred evaluation"),
])
def test_async_error_reraised_on_access(mode, message):
    x = _own(np.zeros(2, np.int32))
    from ndd._dispatch import call

    with mode:
        y = call(PROBE, (x,), {"fail": True})  # the user's call line
        call_line = traceback.extract_stack()[-1].lineno - 1
    with pytest.raises(KeyError) as info:
        np.asarray(y)
    assert str(info.value).strip("'\"") == message
    cause = info.value.__cause__
    assert isinstance(cause, KeyError) and "on purpose" in str(cause)
    frames = traceback.extract_tb(cause.__traceback__)
    assert frames[0].filename == __file__ and frames[0].lineno == call_line
    with pytest.raises(KeyError):  # every access re-raises
        y.evaluate()


@pytest.mark.parametrize("mode", [ndd.EvalMode.eager, ndd.EvalMode.deferred])
def test_async_error_of_an_input_is_the_cause_of_a_chain(mode):
    """A failed call read by a later one: the chain's error has the original error as its
    cause, not a second wrapper (f(g(x)) fails in g)."""
    from ndd._dispatch import call

    x = _own(np.zeros(2, np.int32))
    with mode:
        y = call(PROBE, (call(PROBE, (call(PROBE, (x,), {"fail": True}),), {}),), {})
    with pytest.raises(KeyError) as info:
        y.evaluate()
    cause = info.value.__cause__
    assert isinstance(cause, KeyError) and "on purpose" in str(cause) and cause.__cause__ is None


def test_argument_errors_raise_at_call_in_every_mode():
    x = _own(np.zeros(2, np.int32))
    for mode in ndd.EvalMode:
        with mode, pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            probe(x, nope=1)


def test_waiting_from_executor_thread_does_not_deadlock():
    # A kernel that reads another lazy result while running on the executor.
    x = _own(np.zeros(2, np.int32))
    inner = probe(x, tag=1)
    holder = {}

    def read_inner(ctx, inputs, args):
        holder["v"] = np.asarray(inner).tolist()
        return inputs[0].dense

    s = OpSchema("_test_reader_probe", internal=True)
    if "_test_reader_probe" not in schemas():
        reg = Registry("tests")
        reg.add_schema(s)
        reg.add_kernel("_test_reader_probe", "cpu", read_inner)
    from ndd._dispatch import call

    np.asarray(call(schemas()["_test_reader_probe"], (x,), {}))
    assert holder["v"] == [1, 1]


def test_two_threads_forcing_one_deferred_call_both_get_it():
    """While one thread runs a deferred call, another that needs it waits for that run
    (it used to wait forever: the claim of a call was never given back)."""
    _gate.clear()
    with ndd.EvalMode.deferred:
        t = probe(_own(np.zeros(2, np.int32)), wait=True, tag=7)
    got = {}

    def force(name):
        got[name] = np.asarray(t).tolist()

    first = threading.Thread(target=force, args=("first",), daemon=True)
    first.start()
    deadline = time.time() + 5
    while not t._inv._claim.locked() and time.time() < deadline:  # the first thread is running it
        time.sleep(0.001)
    second = threading.Thread(target=force, args=("second",), daemon=True)
    second.start()
    time.sleep(0.05)
    _gate.set()
    first.join(5)
    second.join(5)
    assert got == {"first": [1, 1], "second": [1, 1]}
    assert [tag for tag, _ in _runs] == [7]  # it ran once


def test_executors_run_what_was_submitted_and_stop_at_exit():
    """At interpreter exit each executor runs what was submitted, then its thread ends (a
    thread left inside a kernel while the interpreter shuts down could abort the process);
    a later call starts a new one."""
    from ndd import _eval

    _gate.clear()
    t = probe(_own(np.zeros(2, np.int32)), wait=True, tag=3)
    _gate.set()
    _eval._stop_executors()  # what atexit runs
    assert not [th for th in threading.enumerate() if th.name == "ndd-executor"]
    assert [tag for tag, _ in _runs] == [3] and np.asarray(t).tolist() == [1, 1]
    assert np.asarray(probe(_own(np.zeros(2, np.int32)), tag=4)).tolist() == [1, 1]
    assert [tag for tag, _ in _runs] == [3, 4]


def test_eval_context():
    ctx = ndd.EvalContext(num_threads=2)
    assert ctx.num_threads == 2 and ctx.device_id is None and ctx.cuda_stream is None
    with pytest.raises(ValueError):
        ndd.EvalContext(num_threads=2, thread_pool=ndd.ThreadPool(1))
    assert ndd.EvalContext.current() is ndd.EvalContext.default()
    with ctx:
        assert ndd.EvalContext.current() is ctx
        x = _own(np.zeros(2, np.int32))
        y = probe(x)
        ctx.evaluate_all()
        assert len(_runs) == 1 and y.evaluate() is y
    assert ndd.EvalContext.current() is ndd.EvalContext.default()


def test_eval_context_two_threads():
    ctx = ndd.EvalContext()
    entered, release, errors = threading.Event(), threading.Event(), []

    def hold():
        with ctx:
            entered.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    entered.wait(5)
    try:
        with ctx:
            pass
    except RuntimeError as e:
        errors.append(str(e))
    release.set()
    t.join()
    assert errors == ["An EvalContext cannot be active in two threads simultaneously."]
    with ctx:  # free again once the other thread left
        pass


def test_default_context_per_thread():
    other = []
    t = threading.Thread(target=lambda: other.append(ndd.EvalContext.current()))
    t.start()
    t.join()
    assert other[0] is not ndd.EvalContext.current()


def test_checkpoint_property_needs_package():
    try:
        import ndd_checkpoint  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="ndd-checkpoint"):
            ndd.EvalContext().checkpoint  # noqa: B018


@pytest.mark.parametrize("mode", list(ndd.EvalMode))
def test_a_failing_operator_raises_runtime_error_as_dali_does(mode):
    """A ValueError raised while an operator runs comes out as ndd.OperatorError, which code
    written for DALI catches as RuntimeError (and ndd's own code as ValueError)."""
    with mode:
        try:
            ndd.reshape(ndd.tensor([1, 2, 3]), shape=[2]).evaluate()
        except RuntimeError as e:
            err = e
    assert isinstance(err, ndd.OperatorError) and isinstance(err, ValueError)
    root = err.__cause__ if err.__cause__ is not None else err
    assert type(root) is ndd.OperatorError and "cannot reshape a sample of shape (3,)" in str(root)
    frames = traceback.extract_tb(root.__traceback__)
    assert any(f.name == "_reshape_cpu" for f in frames)  # the kernel's own frames are kept
    with pytest.raises(TypeError):  # argument errors at the call keep their types
        ndd.reshape(ndd.tensor([1, 2, 3]), shape="x")


def test_contexts_left_out_of_order_leave_the_others_entered():
    """A context exited while another was entered after it (a generator holding one across
    its yields) leaves that other one current."""
    a, b = ndd.EvalContext(num_threads=1), ndd.EvalContext(num_threads=1)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert ndd.EvalContext.current() is b
    b.__exit__(None, None, None)
    assert ndd.EvalContext.current() is ndd.EvalContext.default()


def test_argument_errors_are_runtime_errors_too():
    """DALI raises RuntimeError for a bad argument; ndd's checks raise OperatorError, which is
    that and a ValueError, at the call, with the same message."""
    t = ndd.tensor(np.zeros((2, 3, 4), np.float32))
    for bad in (lambda: ndd.transpose(t, perm=[1, 0]), lambda: ndd.expand_dims(t, axes=[0, 0]),
                lambda: t & t, lambda: ndd.reductions.sum(t, axes=[5])):
        with pytest.raises(RuntimeError) as e:
            bad()
        assert isinstance(e.value, ndd.OperatorError) and isinstance(e.value, ValueError)
    with pytest.raises(TypeError):  # unknown arguments stay TypeErrors, as in Python and DALI
        ndd.transpose(t, no_such=1)
