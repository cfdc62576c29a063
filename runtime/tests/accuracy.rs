//! ULP accuracy of every math function against a reference (std / the
//! `libm` crate in f64; the rounded f64 reference for f32), on 10^6 points
//! in release builds (2·10^4 in debug) plus special values.

mod support;

use support::*;

fn check(name: &str) {
    let table = unary_table();
    let u = table
        .iter()
        .find(|u| u.name == name)
        .expect("function in table");
    let r = measure(u, 0x5eed ^ name.len() as u64);
    assert!(
        r.max64.0 <= u.bound.0,
        "{name} f64: {} ULP at x = {:e}",
        r.max64.0,
        r.max64.1
    );
    assert!(
        r.max32.0 <= u.bound.1,
        "{name} f32: {} ULP at x = {:e}",
        r.max32.0,
        r.max32.1
    );
    let s = measure_specials(u);
    assert!(
        s.0 <= u.bound.0,
        "{name} special value x = {:e}: {} ULP",
        s.1,
        s.0
    );
}

macro_rules! accuracy_tests {
    ($($t:ident => $n:literal),* $(,)?) => {
        $(
            #[test]
            fn $t() {
                check($n);
            }
        )*
    };
}

accuracy_tests! {
    exp => "exp", exp2 => "exp2", expm1 => "expm1", log => "log", log2 => "log2", log10 => "log10",
    log1p => "log1p", tanh => "tanh", sigmoid => "sigmoid", softplus => "softplus", log1mexp => "log1mexp",
    sin => "sin", cos => "cos", tan => "tan", arcsin => "arcsin", arccos => "arccos", arctan => "arctan",
    sinh => "sinh", cosh => "cosh", arctanh => "arctanh", arcsinh => "arcsinh", arccosh => "arccosh",
    erf => "erf", erfc => "erfc",
}

#[test]
fn pow() {
    let (w64, w32) = measure_pow(99);
    assert!(
        w64.0 <= 2.0,
        "pow f64: {} ULP at ({:e}, {:e})",
        w64.0,
        w64.1,
        w64.2
    );
    assert!(
        w32.0 <= 1.0,
        "pow f32: {} ULP at ({:e}, {:e})",
        w32.0,
        w32.1,
        w32.2
    );
    let s = measure_pow_specials();
    assert!(
        s.0 <= 2.0,
        "pow special ({:e}, {:e}): {} ULP",
        s.1,
        s.2,
        s.0
    );
}

#[test]
fn trig_huge_arguments_are_nan() {
    let x = [1.2e15, -1e300, f64::MAX];
    let mut o = [0.0; 3];
    kiln_runtime::math::sin_f64(&x, &mut o);
    assert!(o.iter().all(|v| v.is_nan()));
}

#[test]
fn in_place_and_ragged_lengths() {
    use kiln_runtime::math::*;
    for n in [0usize, 1, 7, 63, 64, 65, 1000] {
        let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.01 - 3.0).collect();
        let mut want = vec![0.0; n];
        tanh_f64(&x, &mut want);
        let mut buf = x.clone();
        // SAFETY: in-place use (out == x) is part of the documented contract.
        unsafe { kiln_tanh_f64(buf.as_ptr(), buf.as_mut_ptr(), n) };
        assert_eq!(buf, want);
        let mut b32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut w32 = vec![0.0f32; n];
        exp_f32(&b32, &mut w32);
        // SAFETY: as above.
        unsafe { kiln_exp_f32(b32.as_ptr(), b32.as_mut_ptr(), n) };
        assert_eq!(b32, w32);
        let y: Vec<f64> = (0..n).map(|i| i as f64 * 0.1).collect();
        let mut p = vec![0.0; n];
        pow_f64(&x, &y, &mut p);
        let mut xb = x.clone();
        // SAFETY: out == x allowed.
        unsafe { kiln_pow_f64(xb.as_ptr(), y.as_ptr(), xb.as_mut_ptr(), n) };
        assert_eq!(
            xb.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            p.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}
