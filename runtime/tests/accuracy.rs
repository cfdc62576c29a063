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

/// Arguments beyond the vector reduction's exact range, mixed into groups
/// of ordinary ones, are computed exactly like the C library does; the
/// ordinary lanes around them keep the vector path's value.
#[test]
fn trig_huge_arguments_take_the_exact_path() {
    use kiln_runtime::math::*;
    let mut x: Vec<f64> = (0..40).map(|i| i as f64 * 0.37 - 7.0).collect();
    for (k, big) in [
        (3, 1.2e15),
        (17, -1e300),
        (18, f64::MAX),
        (33, 2.0e7),
        (39, -1.3e7),
    ] {
        x[k] = big;
    }
    x.extend([f64::INFINITY, f64::NEG_INFINITY, f64::NAN]);
    type F64Fn = fn(&[f64], &mut [f64]);
    type F32Fn = fn(&[f32], &mut [f32]);
    type Case = (&'static str, F64Fn, F32Fn, fn(f64) -> f64);
    let fns: [Case; 3] = [
        ("sin", sin_f64, sin_f32, f64::sin),
        ("cos", cos_f64, cos_f32, f64::cos),
        ("tan", tan_f64, tan_f32, f64::tan),
    ];
    for (name, f64_fn, f32_fn, exact) in fns {
        let mut o = vec![0.0; x.len()];
        f64_fn(&x, &mut o);
        let mut small = vec![0.0; 1];
        for (i, (&xi, &oi)) in x.iter().zip(&o).enumerate() {
            if xi.abs() >= 1.3e7 || xi.is_nan() {
                assert!(
                    oi.to_bits() == exact(xi).to_bits() || (oi.is_nan() && exact(xi).is_nan()),
                    "{name}({xi:e}) = {oi:e}, std gives {:e}",
                    exact(xi)
                );
            } else {
                // Same value as when the lane is computed on its own.
                f64_fn(&x[i..=i], &mut small);
                assert_eq!(oi.to_bits(), small[0].to_bits(), "{name}({xi:e})");
            }
        }
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut o32 = vec![0.0f32; x32.len()];
        f32_fn(&x32, &mut o32);
        for (&xi, &oi) in x32.iter().zip(&o32) {
            let want = exact(f64::from(xi)) as f32;
            if xi.abs() >= 1.3e7 || xi.is_nan() {
                assert!(
                    oi.to_bits() == want.to_bits() || (oi.is_nan() && want.is_nan()),
                    "{name}_f32({xi:e}) = {oi:e}, want {want:e}"
                );
            }
        }
    }
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

#[test]
fn arctan2() {
    let (w64, w32) = measure_atan2(77);
    assert!(
        w64.0 <= 2.0,
        "arctan2 f64: {} ULP at ({:e}, {:e})",
        w64.0,
        w64.1,
        w64.2
    );
    assert!(
        w32.0 <= 1.0,
        "arctan2 f32: {} ULP at ({:e}, {:e})",
        w32.0,
        w32.1,
        w32.2
    );
    // Zeros, infinities and NaN are exact (a wrong one counts as infinite).
    let s = measure_atan2_specials();
    assert!(
        s.0 <= 2.0,
        "arctan2 special ({:e}, {:e}): {} ULP",
        s.1,
        s.2,
        s.0
    );
}

#[test]
fn hypot() {
    let (w64, w32) = measure_hypot(41);
    assert!(
        w64.0 <= 1.0,
        "hypot f64: {} ULP at ({:e}, {:e})",
        w64.0,
        w64.1,
        w64.2
    );
    assert!(
        w32.0 <= 1.0,
        "hypot f32: {} ULP at ({:e}, {:e})",
        w32.0,
        w32.1,
        w32.2
    );
    // Zeros, infinities (which win over NaN) and NaN are exact.
    let s = measure_hypot_specials();
    assert!(
        s.0 <= 1.0,
        "hypot special ({:e}, {:e}): {} ULP",
        s.1,
        s.2,
        s.0
    );
}

#[test]
fn pow_special_cases() {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let cases = [
        (nan, 0.0, 1.0),
        (1.0, nan, 1.0),
        (-1.0, inf, 1.0),
        (-0.0, -3.0, -inf),
        (0.0, -2.0, inf),
        (-0.0, 3.0, -0.0),
        (-2.0, 3.0, -8.0),
        (-2.0, 0.5, nan),
        (-inf, 0.5, inf),
        (-inf, 3.0, -inf),
        (0.5, inf, 0.0),
        (2.0, -inf, 0.0),
        (nan, inf, nan),
        (2.0, 1024.0, inf),
        (2.0, -1074.0, 5e-324),
    ];
    for (x, y, want) in cases {
        let mut o = [0.0];
        kiln_runtime::math::pow_f64(&[x], &[y], &mut o);
        assert!(
            ulp64(o[0], want) == 0.0,
            "pow({x}, {y}) = {} want {want}",
            o[0]
        );
    }
}

#[test]
fn sigmoid_binary_crossentropy() {
    let (w64, w32) = measure_sigmoid_xent(31);
    assert!(
        w64.0 <= 2.0,
        "f64: {} ULP at ({:e}, {:e})",
        w64.0,
        w64.1,
        w64.2
    );
    assert!(
        w32.0 <= 1.0,
        "f32: {} ULP at ({:e}, {:e})",
        w32.0,
        w32.1,
        w32.2
    );
    let s = measure_sigmoid_xent_specials();
    assert!(s.0 <= 2.0, "special ({:e}, {:e}): {} ULP", s.1, s.2, s.0);
}

/// The f32 kernels (`single`'s in f32 lanes, `lean`'s in f64 lanes sized
/// for an f32 result) are faithfully rounded: on the special values and a regular
/// sample of every f32 bit pattern (every 257th in release, about 16.7
/// million inputs with NaNs, zeros and subnormals; the example sweeps all
/// 2^32), no result is more than 1 ULP from the rounded f64 reference, and
/// NaN maps to NaN.
#[test]
fn native_f32_kernels_are_faithful_on_a_sweep_of_all_bit_patterns() {
    let natives = kiln_runtime::math::native_f32_functions();
    assert!(natives.contains(&"exp") && natives.contains(&"tanh"));
    let step = if cfg!(debug_assertions) { 65_537 } else { 257 };
    for u in unary_table().iter().filter(|u| natives.contains(&u.name)) {
        // The special values first (the sweep's stride skips ±inf).
        let specials = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(1),
            -f32::from_bits(1),
            f32::MAX,
            f32::MIN,
            1.0,
            -1.0,
        ];
        let mut out = [0.0f32; 13];
        (u.f32)(&specials, &mut out);
        for (&x, &y) in specials.iter().zip(&out) {
            let e = ulp32(y, (u.reference)(f64::from(x)) as f32);
            assert!(e <= 1.0, "{}({x:e}) = {y:e}: {e} ULP", u.name);
        }
        let s = sweep_f32(u, step);
        assert!(s.checked > (1u64 << 32) / u64::from(step) - 2);
        assert!(
            s.max <= 1.0,
            "{} f32: {} ULP at x = {:e} ({:#010x})",
            u.name,
            s.max,
            s.worst,
            s.worst.to_bits()
        );
    }
}
