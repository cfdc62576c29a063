//! `kiln eval EXPR --in x=x.npy ...`: types every input by its `.npy` file
//! (dtype and static shape), compiles the expression under the chosen mode,
//! runs it once, and writes the result as `.npy` (dtype kept) or prints its
//! shape, dtype and a numpy-like summary. With `--grad x`, the value
//! computed is the gradient of the (scalar) expression with respect to `x`.
//! With `--stream`, [`stream`](super::stream) evaluates out of core.

use std::io::Write;
use std::path::PathBuf;

use super::{build, npy, parse_mode, CliError, CliResult, Declared, EvalArgs};
use crate::function::function;
use crate::graph::{DType, Value};
use crate::linker::Arg;
use crate::tensor::tensor;

/// One `--in NAME=FILE.npy`.
pub fn parse_input(s: &str) -> CliResult<(String, PathBuf)> {
    let bad = || CliError::usage(format!("bad input '{s}' (expected NAME=FILE.npy)"));
    let (name, path) = s.split_once('=').ok_or_else(bad)?;
    let name = name.trim();
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident || path.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

/// Runs `kiln eval` (in memory; `--stream` is [`super::stream::report`]).
pub fn run(a: &EvalArgs, out: &mut dyn Write) -> CliResult {
    let mode = parse_mode(&a.mode)?;
    let mut decls = Vec::new();
    let mut values = Vec::new();
    for s in &a.inputs {
        let (name, path) = parse_input(s)?;
        if decls.iter().any(|d: &Declared| d.name == name) {
            return Err(CliError::usage(format!("input '{name}' is given twice")));
        }
        let v = npy::read(&path)?;
        let dims: Vec<Option<usize>> = v.shape().iter().map(|&d| Some(d)).collect();
        decls.push(Declared {
            name: name.clone(),
            dtype: v.dtype(),
            dims: dims.clone(),
            tensor: tensor(&name, v.dtype(), &dims),
        });
        values.push(v);
    }
    let y = build(&a.expr, &decls)?;
    let y = match &a.grad {
        Some(name) => {
            super::grad::gradients(&y, &decls, std::slice::from_ref(name), &a.expr)?.remove(0)
        }
        None => y,
    };
    let inputs: Vec<_> = decls.iter().map(|d| d.tensor.clone()).collect();
    let f = function(&inputs, &[y])
        .mode(mode)
        .message("kiln eval")
        .compile()
        .map_err(|e| CliError::from_kiln(e, &a.expr))?;
    let args: Vec<Arg<'_>> = values.iter().map(Arg::from).collect();
    let (mut res, run_profile) = if a.profile {
        let (r, p) = f
            .call_profiled(&args)
            .map_err(|e| CliError::usage(e.to_string()))?;
        (r, Some(p))
    } else {
        (
            f.call(&args).map_err(|e| CliError::usage(e.to_string()))?,
            None,
        )
    };
    let result = res
        .pop()
        .ok_or_else(|| CliError::usage("the expression has no output"))?;
    match &a.out {
        Some(path) => {
            npy::write(path, &result)?;
            writeln!(
                out,
                "wrote {} {} array of shape {} to {}",
                result.dtype(),
                kind(result.dtype()),
                shape_text(result.shape()),
                path.display()
            )?;
        }
        None => out.write_all(summary(&result).as_bytes())?,
    }
    if let Some(p) = run_profile {
        writeln!(out)?;
        writeln!(out, "{}", f.profile())?;
        writeln!(out, "{}", f.rewrite_profile())?;
        writeln!(out, "Run profile (one call)")?;
        writeln!(out, "----------------------")?;
        writeln!(
            out,
            "  total {:.3} ms, peak intermediate buffers {} bytes",
            p.total.as_secs_f64() * 1e3,
            p.peak_bytes
        )?;
        for (name, t) in &p.nodes {
            writeln!(out, "  {:>10.3} ms  {name}", t.as_secs_f64() * 1e3)?;
        }
    }
    Ok(())
}

fn kind(d: DType) -> &'static str {
    if d == DType::Bool {
        "boolean"
    } else if d.is_float() {
        "float"
    } else {
        "integer"
    }
}

/// `(3,)`, `(2, 3)`, `()` as numpy prints shapes.
pub fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A number with 6 significant digits, as numpy's `%g`.
pub fn g(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let e = v.abs().log10().floor() as i32;
    if (-5..6).contains(&e) {
        let digits = (5 - e).max(0) as usize;
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        let s = format!("{v:.5e}");
        let (m, ex) = s.split_once('e').unwrap_or((&s, "0"));
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.')
        } else {
            m
        };
        format!("{m}e{ex}")
    }
}

/// Shape, dtype, the first and last elements, and min / max / mean:
///
/// ```text
/// shape (5,)  dtype f64
/// [0, 0.693147, 1.31326, ..., 800]
/// min 0  max 800  mean 160.4
/// ```
pub fn summary(v: &Value) -> String {
    let dt = v.dtype();
    let flat: Vec<f64> = v.to_f64_array().iter().copied().collect();
    let show = |x: f64| match dt {
        DType::Bool => if x != 0.0 { "True" } else { "False" }.to_string(),
        d if d.is_float() => g(x),
        _ => format!("{}", x as i64),
    };
    let mut s = format!("shape {}  dtype {dt}\n", shape_text(v.shape()));
    let n = flat.len();
    let items: Vec<String> = if n <= 6 {
        flat.iter().map(|&x| show(x)).collect()
    } else {
        let mut it: Vec<String> = flat[..3].iter().map(|&x| show(x)).collect();
        it.push("...".into());
        it.extend(flat[n - 3..].iter().map(|&x| show(x)));
        it
    };
    if v.ndim() == 0 {
        s += &items.join("");
    } else {
        s += &format!("[{}]", items.join(", "));
    }
    s.push('\n');
    if n > 0 {
        let nan = flat.iter().any(|x| x.is_nan());
        let (min, max) = if nan {
            (f64::NAN, f64::NAN)
        } else {
            flat.iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                })
        };
        let mean = flat.iter().sum::<f64>() / n as f64;
        s += &format!("min {}  max {}  mean {}\n", show(min), show(max), g(mean));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, IxDyn};

    #[test]
    fn g_formats_like_numpy() {
        assert_eq!(g(std::f64::consts::LN_2), "0.693147");
        assert_eq!(g(800.0), "800");
        assert_eq!(g(1e-300), "1e-300");
        assert_eq!(g(1.5e10), "1.5e10");
        assert_eq!(g(-2.5), "-2.5");
        assert_eq!(g(f64::NAN), "nan");
    }

    #[test]
    fn summaries() {
        let v = Value::from(ArrayD::from_shape_vec(IxDyn(&[8]), (0..8).collect()).unwrap());
        assert_eq!(
            summary(&v),
            "shape (8,)  dtype i32\n[0, 1, 2, ..., 5, 6, 7]\nmin 0  max 7  mean 3.5\n"
        );
        let b = Value::from(ArrayD::from_elem(IxDyn(&[]), true));
        assert_eq!(
            summary(&b),
            "shape ()  dtype bool\nTrue\nmin True  max True  mean 1\n"
        );
        assert!(parse_input("x=a.npy").is_ok());
        assert!(parse_input("x").is_err());
        assert!(parse_input("1x=a.npy").is_err());
    }
}
