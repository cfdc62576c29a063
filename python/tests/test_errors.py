"""kiln's errors as Python exceptions: type and text, as the command line prints them."""

import numpy as np
import pytest

import kiln


def test_parse_error_has_the_caret():
    x = np.arange(3.0)
    with pytest.raises(ValueError) as e:
        kiln.evaluate("x + * 2")
    msg = str(e.value)
    lines = msg.splitlines()
    assert "x + * 2" in msg and lines[-1].strip() == "^"
    assert lines[-1].index("^") == lines[-2].index("*")


def test_unknown_variable_names_it_with_a_caret():
    x = np.arange(3.0)
    with pytest.raises(ValueError, match="unknown variable 'nope'") as e:
        kiln.evaluate("x + nope")
    assert str(e.value).splitlines()[-1].strip() == "^"


def test_unknown_function_suggests():
    x = np.arange(3.0)
    with pytest.raises(ValueError, match="exq"):
        kiln.evaluate("exq(x)")


def test_type_error_for_operand_dtypes():
    b = np.array([True, False])
    with pytest.raises(TypeError, match="sub"):
        kiln.evaluate("b - b")


def test_shape_mismatch_is_a_value_error():
    a, b = np.arange(3.0), np.arange(4.0)
    with pytest.raises(ValueError):
        kiln.evaluate("a + b")


def test_unsupported_dtype():
    c = np.arange(3, dtype=np.float16)
    with pytest.raises(TypeError, match="float16"):
        kiln.evaluate("c + 1")
    s = np.array(["a", "b"])
    with pytest.raises(TypeError, match="does not support"):
        kiln.evaluate("s")


def test_bad_mode():
    x = np.arange(3.0)
    with pytest.raises(ValueError, match="unknown mode 'fastest'"):
        kiln.evaluate("x", mode="fastest")


def test_same_text_as_the_cli():
    """The message is the CLI's `error: ...` text without `error: `."""
    x = np.arange(3.0)
    with pytest.raises(ValueError) as e:
        kiln.evaluate("(x + 1")
    assert str(e.value).startswith("parse error") or "expected" in str(e.value)


def test_function_call_errors():
    v = kiln.vector("v", "float64")
    f = kiln.function([v], v * 2)
    with pytest.raises(TypeError, match="has dtype f32, expected f64"):
        f(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="dimension"):
        f(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        f(np.zeros(3), np.zeros(3))


def test_graph_type_errors():
    b = kiln.vector("b", "bool")
    with pytest.raises(TypeError):
        b - b
    m = kiln.matrix("m")
    with pytest.raises(TypeError, match=r"axis 5 out of range for f64\(\?, \?\)$"):
        kiln.sum(m, axis=5)
    with pytest.raises(ValueError, match="keepdims"):
        kiln.sum(m, keepdim=True)
