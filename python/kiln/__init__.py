"""kiln from Python: numpy arrays in and out, a numexpr-compatible
``evaluate``, and graphs built in PyTensor's vocabulary.

    >>> import kiln, numpy as np
    >>> x = np.linspace(-800, 800, 5)
    >>> kiln.evaluate("log(1 + exp(x))")          # finite: kiln's stabilising rewrites
    array([  0.,   0., 693.14718056, 400., 800.])  # doctest: +SKIP

    >>> v = kiln.vector("v", "float64")
    >>> f = kiln.function([v], kiln.sum(kiln.exp(v) * 2, axis=0))
    >>> f(np.zeros(3))
    array(6.)

The compiled half is ``kiln._kiln`` (Rust, ``python/src/``); this file only
adapts signatures: the caller's frame for ``evaluate``, PyTensor-style
constructors, Python operators, and one function per function of kiln's
expression language (``kiln.exp``, ``kiln.sum``, ``kiln.where``, ...), so a
function added to the language is available here without a change.
"""

import sys as _sys

import numpy as _np

from . import _kiln
from ._kiln import Function, FunctionProfile, Variable

__all__ = [
    "evaluate", "scalar", "vector", "matrix", "tensor", "constant", "function",
    "rewrite", "dprint", "pprint", "eq", "neq", "switch", "cast",
    "grad", "jacobian", "hessian",
    "Variable", "Function", "FunctionProfile",
] + list(_kiln.function_names())


def evaluate(ex, local_dict=None, global_dict=None, out=None, mode="fast_run"):
    """Evaluates the expression ``ex`` element-wise (and its reductions,
    ``dot``, ...) over the arrays it names, as ``numexpr.evaluate`` does.

    Variables are looked up in ``local_dict`` then ``global_dict``, which
    default to the caller's locals and globals; ``inf`` and ``nan`` are
    always the constants. Dtypes and ranks come from
    the arrays; the compiled function is cached by expression, mode, and the
    inputs' dtypes and broadcast patterns. With ``out``, the result is
    written into that array (of the result's dtype and shape) and ``out`` is
    returned. ``mode`` is a kiln mode name: ``fast_run`` (default),
    ``fast_compile``, ``none``, optionally with ``-TAG``/``+TAG``.
    Errors are ``ValueError`` (parse errors with a caret, unknown variables,
    shape mismatches) or ``TypeError`` (operand dtypes).
    """
    if local_dict is None or global_dict is None:
        frame = _sys._getframe(1)
        if local_dict is None:
            local_dict = frame.f_locals
        if global_dict is None:
            global_dict = frame.f_globals
        del frame
    return _kiln.evaluate(ex, local_dict, global_dict, out, mode)


def _dtype_name(dtype):
    """numpy's name of any dtype spelling (``"float64"``, ``"f64"``, ``np.float64``)."""
    if isinstance(dtype, str) and dtype in _SHORT:
        return _SHORT[dtype]
    return _np.dtype(dtype).name


_SHORT = {"f64": "float64", "f32": "float32", "i64": "int64", "i32": "int32",
          "i16": "int16", "i8": "int8", "u8": "uint8", "u16": "uint16", "u32": "uint32",
          "u64": "uint64", "bool": "bool"}
_KILN_NAME = {v: k for k, v in _SHORT.items()}


def tensor(*args, dtype=None, shape=None, name=None):
    """A symbolic input of any rank: ``kiln.tensor("float64", (None, 3))``,
    or PyTensor's ``kiln.tensor("x", dtype="float64", shape=(None, 3))``.
    ``None`` is a size known only at run time; a size of 1 broadcasts."""
    args = list(args)
    if args and dtype is None and shape is None and len(args) >= 1 and _is_dtype(args[0]):
        dtype = args.pop(0)
        if args:
            shape = args.pop(0)
    elif args and name is None:
        name = args.pop(0)
        if args and dtype is None:
            dtype = args.pop(0)
        if args and shape is None:
            shape = args.pop(0)
    if args:
        raise TypeError("tensor() takes at most a name, a dtype and a shape")
    return _kiln.tensor_input(name or "", _dtype_name(dtype or "float64"),
                              list(shape if shape is not None else ()))


def _is_dtype(x):
    if not isinstance(x, str):
        return True
    if x in _SHORT:
        return True
    try:
        _np.dtype(x)
        return True
    except TypeError:
        return False


def scalar(name=None, dtype="float64"):
    """A 0-d symbolic input."""
    return tensor(name=name, dtype=dtype, shape=())


def vector(name=None, dtype="float64"):
    """A 1-d symbolic input of dynamic length."""
    return tensor(name=name, dtype=dtype, shape=(None,))


def matrix(name=None, dtype="float64"):
    """A 2-d symbolic input of dynamic shape."""
    return tensor(name=name, dtype=dtype, shape=(None, None))


def constant(value):
    """A symbolic constant holding a copy of ``value`` (any array-like)."""
    return _kiln.constant(value)


def function(inputs, outputs, mode="FAST_RUN", mutable_inputs=()):
    """Compiles ``outputs`` (a variable, or a list of them) as a function of
    the variables ``inputs``. The callable takes one array per input and
    returns an array (or a list when ``outputs`` is a list).
    ``mutable_inputs`` (variables or positions) may be overwritten by
    inplace rewrites when passed as writable numpy arrays of their dtype."""
    single = isinstance(outputs, Variable)
    outs = [outputs] if single else list(outputs)
    inputs = list(inputs)
    positions = []
    for m in mutable_inputs:
        if isinstance(m, Variable):
            matches = [k for k, v in enumerate(inputs) if v is m]
            if not matches:
                raise ValueError(f"mutable input {m!r} is not among the inputs")
            positions.append(matches[0])
        else:
            positions.append(int(m))
    return _Compiled(_kiln.compile(inputs, outs, mode, positions), single)


class _Compiled:
    """A compiled function (see ``kiln.function``)."""

    __slots__ = ("fn", "_single")

    def __init__(self, fn, single):
        self.fn = fn
        self._single = single

    def __call__(self, *args):
        res = self.fn(*args)
        return res[0] if self._single else res

    def __reduce__(self):
        # The compiled half pickles as its graph and mode (and recompiles,
        # once per process, when unpickled).
        return (_Compiled, (self.fn, self._single))

    @property
    def profile(self):
        """Compile and call times and node counts (``print(f.profile)``)."""
        return self.fn.profile

    @property
    def rewrite_profile(self):
        """Per-rewriter times and the rewrite log, as text."""
        return self.fn.rewrite_profile

    def dprint(self, file=None):
        """The debug tree of the compiled graph (printed, or returned when ``file="str"``)."""
        return _out(self.fn.dprint(), file)

    def pprint(self):
        """The compiled graph in infix form."""
        return self.fn.pprint()

    def wait_final(self):
        """Blocks until the kernels run their final code (see ``Function.wait_final``)."""
        return self.fn.wait_final()


def _unpickle_variable(payload):
    """Rebuilds a pickled ``Variable`` (its recipe: how it was built)."""
    return _kiln.load_variable(payload)


def _unpickle_function(payload):
    """Rebuilds and compiles a pickled ``Function``, or returns the one this
    process already compiled from the same payload."""
    return _kiln.load_function(payload)


def _cache_info():
    """The caches' counters: ``evaluate`` (expressions parsed, functions
    held, compilations) and ``unpickle`` (functions held, compilations, and
    hits: unpickled functions that reused an earlier compilation)."""
    return {"evaluate": _kiln.cache_info(), "unpickle": _kiln.pickle_cache_info()}


def _out(text, file):
    if file == "str":
        return text
    print(text, end="", file=file or _sys.stdout)
    return None


def _outputs(obj):
    if isinstance(obj, Variable):
        return [obj]
    return list(obj)


def rewrite(outputs, mode=None, include=(), require=(), exclude=()):
    """Rewrites the graph of ``outputs`` (a variable or a list) with kiln's
    optdb, as PyTensor's ``rewrite_graph``: ``mode`` (``fast_run`` unless
    ``include``/``require`` are given alone) narrowed by tags. Returns the
    rewritten variable(s) over the same inputs."""
    res = _kiln.rewrite(_outputs(outputs), mode, list(include), list(require), list(exclude))
    return res[0] if isinstance(outputs, Variable) else res


def dprint(obj, file=None):
    """Prints the debug tree of a variable, a list of them or a compiled
    function (returns it as a string when ``file="str"``)."""
    if isinstance(obj, _Compiled):
        return obj.dprint(file)
    return _out(_kiln.dprint(_outputs(obj)), file)


def pprint(obj):
    """The infix form of a variable (or a list of them, one per line)."""
    if isinstance(obj, _Compiled):
        return obj.pprint()
    return _kiln.pprint(_outputs(obj)).rstrip("\n")


def eq(a, b):
    """Element-wise ``a == b`` (Python's ``==`` keeps its identity meaning, as in PyTensor)."""
    return _kiln.infix("==", a, b)


def neq(a, b):
    """Element-wise ``a != b``."""
    return _kiln.infix("!=", a, b)


def cast(x, dtype):
    """``x`` converted to ``dtype`` (any numpy spelling)."""
    return _kiln.apply("cast", (x, _KILN_NAME[_dtype_name(dtype)]))


def _wrt_list(wrt):
    """``wrt`` as a list, and whether it was a single variable."""
    if isinstance(wrt, Variable):
        return [wrt], True
    return list(wrt), False


def _as_variable(g):
    return g if isinstance(g, Variable) else constant(g)


def grad(cost, wrt, known_grads=None, disconnected_inputs="raise"):
    """The gradient of the 0-d ``cost`` with respect to ``wrt`` (a variable,
    or a list of them: the result has the same form), as PyTensor's
    ``grad``: reverse mode, built as an ordinary graph for
    ``kiln.function``. ``known_grads`` maps variables to their given
    gradients (variables or arrays; ``cost`` may then be ``None``).
    ``disconnected_inputs``: ``"raise"`` (a ``ValueError`` when the cost
    does not depend on a ``wrt``), ``"warn"`` (zeros, and a ``UserWarning``
    through Python's ``warnings``) or ``"ignore"`` (zeros)."""
    ws, single = _wrt_list(wrt)
    known = [(v, _as_variable(g)) for v, g in (known_grads or {}).items()]
    gs = _kiln.grad(cost, ws, known, disconnected_inputs)
    return gs[0] if single else gs


def jacobian(expression, wrt):
    """The Jacobian of ``expression`` (0-d, or 1-d of static length) with
    respect to ``wrt`` (a variable or a list): row ``i`` is the gradient of
    ``expression[i]``, of shape ``(n, *wrt.shape)``. A ``wrt`` the
    expression does not depend on gets zeros."""
    ws, single = _wrt_list(wrt)
    js = _kiln.jacobian(expression, ws)
    return js[0] if single else js


def hessian(cost, wrt):
    """The Hessian of the 0-d ``cost`` with respect to ``wrt`` (a variable
    or a list, each 0-d or 1-d of static length): the Jacobian of its
    gradient."""
    ws, single = _wrt_list(wrt)
    hs = _kiln.hessian(cost, ws)
    return hs[0] if single else hs


def _make_function(name):
    def op(*args, **kwargs):
        return _kiln.apply(name, args, kwargs or None)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"kiln's ``{name}`` (see the expression language in kiln's README)."
    return op


for _name in _kiln.function_names():
    if _name != "cast":
        globals()[_name] = _make_function(_name)
switch = globals()["where"]


